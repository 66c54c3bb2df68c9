// SPDX-License-Identifier: MIT
/*
 * strixpeerctl bench's SVG plot (user/bench/), on the host: results made
 * up here, written with sp_bench_write_plot() into paths a shell would
 * have to quote (a quote, a double quote, a space, $), drawn by gnuplot
 * when it is installed; without gnuplot on PATH, -ENOENT and the message
 * strixpeerctl bench prints; without RDMA figures, -ENODATA; a run of
 * RDMA WRITE alone (--ops host,write) with some kinds left out draws one
 * panel with the kinds that have values.
 */
#include <limits.h>
#include <sys/stat.h>

#include "tap.h"
#include "bench_int.h"

static char dir[PATH_MAX];

/* Results with every bandwidth figure for three message sizes. */
static void fake(struct sp_bench *b, bool rdma)
{
	static const char *const figs[] = { "write_bw", "read_bw", "send_bw" };

	memset(b, 0, sizeof(*b));
	sp_bench_opts_init(&b->o);
	sp_bench_copy(b->kernel, sizeof(b->kernel), "6.12'test\"kernel");
	sp_bench_copy(b->mode, sizeof(b->mode), "local");
	for (size_t j = 0; rdma && j < 3; j++)
		for (uint64_t sz = 4096; sz <= 16384; sz *= 2) {
			struct sp_bench_series *s = sp_bench_series_get(b, figs[j], sz, "MiB/s", true);

			CHECK(s, "out of memory");
			for (int k = 0; k < SP_BENCH_NR_KINDS; k++)
				sp_bench_add(s, (enum sp_bench_kind)k, 100.0 * (k + 1) + (double)sz / 1024);
		}
}

static void mkdirs(const char *sub, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", dir, sub);
	CHECK(mkdir(out, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", out, strerror(errno));
}

static void test_plot_path_with_quotes(void)
{
	char d[PATH_MAX], svg[PATH_MAX + 64], path[PATH_MAX + 128];
	struct sp_bench b;
	struct stat st;
	FILE *f;
	int ret;

	if (system("command -v gnuplot > /dev/null 2>&1"))
		SKIP("gnuplot is not installed");
	mkdirs("it's a \"dir\" $HOME", d, sizeof(d));
	snprintf(svg, sizeof(svg), "%s/b'e\"n ch.svg", d);
	fake(&b, true);
	ret = sp_bench_write_plot(&b, svg);
	free(b.series);
	CHECK(ret == 0, "sp_bench_write_plot: %d %s", ret, sp_bench_errmsg());
	CHECK(stat(svg, &st) == 0 && st.st_size > 1000, "%s: no SVG", svg);
	f = fopen(svg, "re");
	CHECK(f, "%s: %s", svg, strerror(errno));
	{
		char line[4096];
		bool title = false;

		while (fgets(line, sizeof(line), f))
			title |= strstr(line, "kernel 6.12'test") != NULL;
		fclose(f);
		CHECK(title, "the SVG has no title with the kernel's quote");
	}
	snprintf(path, sizeof(path), "%s.dat", svg);
	CHECK(stat(path, &st) == 0 && st.st_size > 0, "%s missing", path);
}

static void test_plot_without_gnuplot(void)
{
	char d[PATH_MAX], svg[PATH_MAX + 64];
	struct sp_bench b;
	int ret;

	mkdirs("nognuplot", d, sizeof(d));
	snprintf(svg, sizeof(svg), "%s/bench.svg", d);
	CHECK(setenv("PATH", "/nonexistent", 1) == 0, "setenv");
	fake(&b, true);
	ret = sp_bench_write_plot(&b, svg);
	free(b.series);
	CHECK(ret == -ENOENT, "returned %d: %s", ret, sp_bench_errmsg());
	CHECK(strstr(sp_bench_errmsg(), "gnuplot is not installed (apt install gnuplot-nox)"),
	      "message: %s", sp_bench_errmsg());
}

static void test_plot_without_rdma_figures(void)
{
	char d[PATH_MAX], svg[PATH_MAX + 64];
	struct sp_bench b;
	int ret;

	mkdirs("nordma", d, sizeof(d));
	snprintf(svg, sizeof(svg), "%s/bench.svg", d);
	fake(&b, false);
	ret = sp_bench_write_plot(&b, svg);
	free(b.series);
	CHECK(ret == -ENODATA, "returned %d: %s", ret, sp_bench_errmsg());
}

static void test_plot_write_only_some_kinds(void)
{
	char d[PATH_MAX], svg[PATH_MAX + 64], gp[PATH_MAX + 128], line[8192];
	struct sp_bench b;
	bool layout = false, other_fig = false, plots_thp = false;
	struct stat st;
	FILE *f;
	int ret;

	if (system("command -v gnuplot > /dev/null 2>&1"))
		SKIP("gnuplot is not installed");
	mkdirs("writeonly", d, sizeof(d));
	snprintf(svg, sizeof(svg), "%s/bench.svg", d);
	memset(&b, 0, sizeof(b));
	sp_bench_opts_init(&b.o);
	sp_bench_copy(b.kernel, sizeof(b.kernel), "6.12");
	sp_bench_copy(b.mode, sizeof(b.mode), "local");
	for (uint64_t sz = 65536; sz <= 262144; sz *= 2) {
		struct sp_bench_series *s = sp_bench_series_get(&b, "write_bw", sz, "MiB/s", true);

		CHECK(s, "out of memory");
		sp_bench_add(s, SP_BENCH_STRIXPEER, 20.0);
		sp_bench_add(s, SP_BENCH_MALLOC, 12.0);
	}
	ret = sp_bench_write_plot(&b, svg);
	free(b.series);
	CHECK(ret == 0, "sp_bench_write_plot: %d %s", ret, sp_bench_errmsg());
	CHECK(stat(svg, &st) == 0 && st.st_size > 1000, "%s: no SVG", svg);
	snprintf(gp, sizeof(gp), "%s.gp", svg);
	f = fopen(gp, "re");
	CHECK(f, "%s: %s", gp, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		layout |= strstr(line, "multiplot layout 1,1 ") != NULL;
		other_fig |= strstr(line, "read_bw") || strstr(line, "send_bw");
		plots_thp |= strstr(line, "title 'thp'") != NULL;
	}
	fclose(f);
	CHECK(layout && !other_fig && !plots_thp,
	      "%s: one panel %d, read/send panels %d, a thp line %d", gp, layout, other_fig, plots_thp);
}

static void test_plot_path_with_newline_refused(void)
{
	struct sp_bench b;
	int ret;

	fake(&b, true);
	ret = sp_bench_write_plot(&b, "/tmp/a\nb.svg");
	free(b.series);
	CHECK(ret == -EINVAL, "returned %d: %s", ret, sp_bench_errmsg());
}

static const struct tap_case cases[] = {
	TAP_CASE(test_plot_path_with_quotes),
	TAP_CASE(test_plot_without_gnuplot),
	TAP_CASE(test_plot_without_rdma_figures),
	TAP_CASE(test_plot_write_only_some_kinds),
	TAP_CASE(test_plot_path_with_newline_refused),
};

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(dir, sizeof(dir), "%s", argc > 1 ? argv[1] : "/tmp/strixpeer-bench-plot");
	if (mkdir(dir, 0755) && errno != EEXIST) {
		printf("TAP version 13\n1..0 # SKIP cannot create %s: %s\n", dir, strerror(errno));
		return 4;
	}
	return tap_run(cases, sizeof(cases) / sizeof(cases[0]));
}
