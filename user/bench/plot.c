// SPDX-License-Identifier: MIT
/*
 * An SVG plot of figures against message size, drawn by gnuplot(1) (run
 * with an argument vector, no shell, so no path needs quoting): one panel
 * per figure, one line per column that has values. strixpeerctl bench's
 * plot (report.c) and strixpeerctl gpu proof's (user/gpu/) draw with it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_int.h"
#include "plot.h"

/* @s as a gnuplot single-quoted string: a quote inside is doubled. */
static void sp_gp_str(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		fputc(*s, f);
	}
	fputc('\'', f);
}

/*
 * Run gnuplot on @gp, its output and errors into @log. Returns gnuplot's
 * wait status, or -errno when it could not be started (-ENOENT: not
 * installed).
 */
static int sp_run_gnuplot(const char *gp, const char *log)
{
	char *const argv[] = { (char *)"gnuplot", (char *)gp, NULL };
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int ret, st;

	ret = posix_spawn_file_actions_init(&fa);
	if (ret)
		return -ret;
	ret = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (!ret)
		ret = posix_spawn_file_actions_addopen(&fa, 1, log,
						       O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (!ret)
		ret = posix_spawn_file_actions_adddup2(&fa, 1, 2);
	if (!ret)
		ret = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (ret)
		return -ret;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return st;
}

static bool sp_col_has(const struct sp_plot_panel *p, unsigned int col)
{
	for (size_t r = 0; r < p->nrows; r++)
		if (!isnan(p->y[r * p->ncols + col]))
			return true;
	return false;
}

/* The data: a block per panel (gnuplot's "index"), a column per line. */
static int sp_plot_dat(const char *dat, const struct sp_plot_panel *p, unsigned int np)
{
	FILE *f = fopen(dat, "we");

	if (!f)
		return sp_bench_fail(errno, "%s: %s", dat, strerror(errno));
	for (unsigned int j = 0; j < np; j++) {
		fprintf(f, "# %s: size", p[j].name);
		for (unsigned int k = 0; k < p[j].ncols; k++)
			fprintf(f, " %s", p[j].col_names[k]);
		fputc('\n', f);
		for (size_t r = 0; r < p[j].nrows; r++) {
			fprintf(f, "%" PRIu64, p[j].x[r]);
			for (unsigned int k = 0; k < p[j].ncols; k++) {
				double m = p[j].y[r * p[j].ncols + k];

				if (isnan(m))
					fputs(" NaN", f);
				else
					fprintf(f, " %.6g", m);
			}
			fputc('\n', f);
		}
		fputs("\n\n", f);
	}
	if (fclose(f))
		return sp_bench_fail(errno, "%s: %s", dat, strerror(errno));
	return 0;
}

int sp_plot_svg(const char *svg, const char *title, const char *ylabel, unsigned int width,
		unsigned int height, const struct sp_plot_panel *p, unsigned int np)
{
	char dat[4096], gp[4096], log[4096], t[512];
	int st, panels = 0, ret;
	FILE *f;

	if (snprintf(dat, sizeof(dat), "%s.dat", svg) >= (int)sizeof(dat) ||
	    snprintf(gp, sizeof(gp), "%s.gp", svg) >= (int)sizeof(gp) ||
	    snprintf(log, sizeof(log), "%s.log", svg) >= (int)sizeof(log))
		return sp_bench_fail(ENAMETOOLONG, "plot path too long");
	/* the one character a gnuplot string cannot hold */
	if (strchr(svg, '\n'))
		return sp_bench_fail(EINVAL, "plot path must not contain a newline");
	for (unsigned int j = 0; j < np; j++)
		for (unsigned int k = 0; k < p[j].ncols; k++)
			if (sp_col_has(&p[j], k) && (!p[j].col_shown || p[j].col_shown[k])) {
				panels++;
				break;
			}
	if (!panels)
		return sp_bench_fail(ENODATA, "no RDMA bandwidth figures to plot");
	ret = sp_plot_dat(dat, p, np);
	if (ret)
		return ret;

	f = fopen(gp, "we");
	if (!f)
		return sp_bench_fail(errno, "%s: %s", gp, strerror(errno));
	snprintf(t, sizeof(t), "%s", title);
	t[strcspn(t, "\n")] = '\0';
	fprintf(f, "set terminal svg size %u,%u dynamic noenhanced font 'sans,11'\nset output ",
		width, height);
	sp_gp_str(f, svg);
	fprintf(f, "\nset multiplot layout 1,%d title ", panels);
	sp_gp_str(f, t);
	fputs("\nset logscale x 2\nset format x '%.0b%B'\nset xlabel 'message size'\n"
	      "set ylabel ", f);
	sp_gp_str(f, ylabel);
	fputs("\nset key top left\nset grid\n", f);
	for (unsigned int j = 0; j < np; j++) {
		bool first = true;

		for (unsigned int k = 0; k < p[j].ncols; k++) {
			if (!sp_col_has(&p[j], k) || (p[j].col_shown && !p[j].col_shown[k]))
				continue;
			if (first) {
				fputs("set title ", f);
				sp_gp_str(f, p[j].name);
				fputs("\nplot ", f);
			}
			fputs(first ? "" : ", ", f);
			first = false;
			sp_gp_str(f, dat);
			fprintf(f, " index %u using 1:%u with linespoints title ", j, k + 2);
			sp_gp_str(f, p[j].col_names[k]);
		}
		if (!first)
			fputc('\n', f);
	}
	fputs("unset multiplot\n", f);
	if (fclose(f))
		return sp_bench_fail(errno, "%s: %s", gp, strerror(errno));

	st = sp_run_gnuplot(gp, log);
	if (st == -ENOENT) {
		unlink(log);	/* opened for a gnuplot that never ran */
		return sp_bench_fail(ENOENT, "gnuplot is not installed (apt install gnuplot-nox); data in %s, script in %s",
				     dat, gp);
	}
	if (st < 0)
		return sp_bench_fail(-st, "cannot run gnuplot: %s", strerror(-st));
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return sp_bench_fail(EIO, "gnuplot %s failed (status %d, see %s)", gp, st, log);
	return 0;
}
