/* SPDX-License-Identifier: MIT */
/*
 * doctor-test's command-line cases: JSON for every fixture, exit codes,
 * bad input, doctor compare, valgrind. Included once, by doctor-test.c, after
 * dt.h.
 */
#ifndef SP_DOCTOR_TEST_DT_CLI_H
#define SP_DOCTOR_TEST_DT_CLI_H

/* --- the command line ------------------------------------------------------ */

/* Exit status of a shell command. */
static int sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	CHECK(st != -1 && WIFEXITED(st), "%s: did not exit", cmd);
	return WEXITSTATUS(st);
}

/* Every check object has id, status, observed and advice; exit matches. */
#define VALIDATE \
	"import json,sys\n" \
	"def check(f, rc):\n" \
	" d=json.load(open(f))\n" \
	" assert set(d) == {'node','checks','summary'}, (f, d.keys())\n" \
	" for c in d['checks']:\n" \
	"  assert set(c) == {'id','check','subject','status','summary','observed','advice'}, (f, c)\n" \
	"  assert c['status'] in ('PASS','INFO','WARN','FAIL','SKIP'), (f, c)\n" \
	"  assert c['id'].startswith(c['check'] + '.'), (f, c)\n" \
	"  assert isinstance(c['observed'], dict) and c['summary'], (f, c)\n" \
	"  assert c['status'] not in ('WARN','FAIL') or c['advice'], (f, c)\n" \
	" n={s: sum(c['status'] == s for c in d['checks']) for s in ('PASS','INFO','WARN','FAIL','SKIP')}\n" \
	" assert all(d['summary'][s] == n[s] for s in n), (f, d['summary'], n)\n" \
	" want = 2 if n['FAIL'] else 1 if n['WARN'] else 0\n" \
	" assert d['summary']['exit'] == want == rc, (f, d['summary'], want, rc)\n" \
	" assert json.load(open(f[:-5] + '.pretty.json')) == d, (f, '-p differs')\n" \
	"for a in sys.argv[1:]:\n" \
	"  f, rc = a.rsplit(':', 1); check(f, int(rc))\n"

/*
 * One type per field on every node: over all the fixtures' reports, each
 * node fact and each check id's observed value has one JSON type (a number
 * may also be null: unlimited); lists are arrays of strings; memlock is
 * bytes or null.
 */
#define SCHEMA \
	"import json,sys\n" \
	"def t(v):\n" \
	"  return 'num' if isinstance(v, (int, float)) and not isinstance(v, bool) else " \
	"'null' if v is None else type(v).__name__\n" \
	"seen = {}\n" \
	"def note(where, v, f):\n" \
	"  if isinstance(v, list):\n" \
	"    assert all(isinstance(x, str) for x in v), (f, where, v)\n" \
	"  seen.setdefault(where, {}).setdefault(t(v), f)\n" \
	"for f in sys.argv[1:]:\n" \
	"  d = json.load(open(f))\n" \
	"  for k, v in d['node'].items(): note(('node', k), v, f)\n" \
	"  for c in d['checks']:\n" \
	"    for k, v in c['observed'].items(): note((c['id'], k), v, f)\n" \
	"  m = d['node'].get('memlock', 0)\n" \
	"  assert m is None or t(m) == 'num', (f, m)\n" \
	"  assert isinstance(d['node'].get('peer_clients', []), list), f\n" \
	"bad = {w: ts for w, ts in seen.items() if len(set(ts) - {'null'} if 'num' in ts else ts) > 1}\n" \
	"assert not bad, bad\n" \
	"for w in (('node', 'memlock'), ('memory.memlock', 'soft'), ('memory.memlock', 'hard')):\n" \
	"  assert set(seen.get(w, {})) <= {'num', 'null'}, (w, seen.get(w))\n" \
	"assert set(seen.get(('node', 'peer_clients'), {'list': 0})) == {'list'}, seen.get(('node', 'peer_clients'))\n"

static void cli_json_valid_for_every_fixture(void)
{
	static const char *const trees[] = {
		"healthy", "oculink-cx3", "ib-no-sm", "ib-polling", "mtu-1500", "mtu-9000",
		"mtu-edge", "memlock-64k", "memlock-unlimited", "strix-6.12", "strix-96g",
		"gttsize", "amd-iommu-off", "peer-strixpeer", "peer-amdkfd", "peer-clash",
		"tb-one-lane", "no-module", "kernel-update", "dev-0600", "rxe-down", "broken",
		"pcie-switch", "pcie-enough", "phoenix-8g", "oculink-cx7", "oculink-cx7-accepted",
		"rccl-config-gz", "rccl-config-gz-truncated", "rdma-irdma-44", "rdma-irdma-56",
		"rdma-mlx5-44", "rdma-irdma-fedora", "rdma-no-verbs", "gtt-default",
		"gpu-no-amdgpu", "no-gpu", "services-default", "services-dropin", "docker-default",
		"docker-ulimits",
	};
	char py[PATH_MAX], args[4096] = "";
	FILE *f;

	dr_fmt(py, sizeof(py), "%s/.validate-%d.py", fx, getpid());
	f = fopen(py, "w");
	CHECK(f, "%s", py);
	fputs(VALIDATE, f);
	fclose(f);
	for (size_t i = 0; i < sizeof(trees) / sizeof(trees[0]); i++) {
		int rc = sh("%s doctor -j --sysroot %s/%s > %s/%s.json 2> %s/%s.err", ctl, fx,
			    trees[i], fx, trees[i], fx, trees[i]);
		size_t l = strlen(args);

		CHECK(rc <= 2, "%s: exit %d", trees[i], rc);
		/* pretty JSON is the same report, and stderr stayed empty */
		CHECK(sh("%s doctor -j -p --sysroot %s/%s > %s/%s.pretty.json", ctl, fx, trees[i],
			 fx, trees[i]) == rc, "%s: -p", trees[i]);
		CHECK(sh("test ! -s %s/%s.err", fx, trees[i]) == 0, "%s wrote to stderr", trees[i]);
		snprintf(args + l, sizeof(args) - l, " %s.json:%d", trees[i], rc);
	}
	CHECK(strlen(args) < sizeof(args) - 1, "the report list does not fit in %zu bytes",
	      sizeof(args));
	/* one python for every report: its start-up was most of the time */
	CHECK(sh("cd %s && python3 .validate-%d.py%s", fx, getpid(), args) == 0,
	      "a report is invalid or inconsistent (the assertion names its file)");
	f = fopen(py, "w");
	CHECK(f, "%s", py);
	fputs(SCHEMA, f);
	fclose(f);
	{
		char files[8192] = "";

		for (size_t i = 0; i < sizeof(trees) / sizeof(trees[0]); i++) {
			size_t l = strlen(files);

			snprintf(files + l, sizeof(files) - l, " %s/%s.json", fx, trees[i]);
		}
		CHECK(sh("python3 %s%s", py, files) == 0,
		      "a field has more than one type across the fixtures' reports");
	}
	unlink(py);
}

static void cli_exit_codes_and_text(void)
{
	CHECK(sh("%s doctor --sysroot %s/healthy > /dev/null", ctl, fx) == 0, "healthy");
	CHECK(sh("%s doctor --sysroot %s/mtu-1500 > /dev/null", ctl, fx) == 1, "WARN");
	CHECK(sh("%s doctor --sysroot %s/ib-no-sm > /dev/null", ctl, fx) == 2, "FAIL");
	/* the text report shows the seed's verdict and its fix */
	CHECK(sh("%s doctor --sysroot %s/ib-no-sm | grep -q '^FAIL  rdma.port  *mlx4_0/1: INIT'",
		 ctl, fx) == 0, "text");
	CHECK(sh("%s doctor --sysroot %s/ib-no-sm | grep -q 'fix: no subnet manager: start opensm'",
		 ctl, fx) == 0, "text advice");
	/* --only: just those checks; global -j works as well */
	CHECK(sh("%s -j doctor --only mtu --sysroot %s/mtu-1500 > %s/only.json", ctl, fx, fx) == 1,
	      "--only exit");
	CHECK(sh("python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
		 "assert {c[\"check\"] for c in d[\"checks\"]} == {\"mtu\"}, d' %s/only.json", fx) == 0,
	      "--only");
	/* strixpeerctl's own -j -p reach doctor: indented JSON */
	CHECK(sh("%s -j -p doctor --only mtu --sysroot %s/mtu-1500 | grep -q '^  \"checks\": \\['",
		 ctl, fx) == 0, "global -j -p");
	/* --only leaves the node facts --compare needs */
	CHECK(sh("%s doctor -j --only mtu --sysroot %s/healthy | python3 -c 'import json,sys; "
		 "n=json.load(sys.stdin)[\"node\"]; assert n[\"module\"] and n[\"library\"] and "
		 "n[\"peer_client_name\"] == \"amdkfd\" and n[\"peer_clients\"] == [\"amdkfd\"], n'",
		 ctl, fx) == 0, "node facts");
}

static void cli_bad_input(void)
{
	CHECK(sh("%s doctor --sysroot /nonexistent/x 2>&1 | grep -q 'sysroot /nonexistent/x: No such file'",
		 ctl) == 0, "message");
	CHECK(sh("%s doctor --sysroot /nonexistent/x > /dev/null 2>&1", ctl) == 3, "bad sysroot exit");
	CHECK(sh("%s doctor --sysroot VERSION 2>&1 | grep -q 'Not a directory'", ctl) == 0,
	      "a file as sysroot");
	CHECK(sh("%s doctor --only bogus > /dev/null 2>&1", ctl) == 3, "bad --only");
	CHECK(sh("%s doctor --bogus > /dev/null 2>&1", ctl) == 3, "bad option");
	CHECK(sh("%s doctor extra > /dev/null 2>&1", ctl) == 3, "stray argument");
	CHECK(sh("%s doctor --rdma-test --size 0 > /dev/null 2>&1", ctl) == 3, "bad --size");
	CHECK(sh("%s doctor --serve --compare a b > /dev/null 2>&1", ctl) == 3, "exclusive");
	/* --rdma-test under a sysroot is refused as a SKIP, not attempted */
	CHECK(sh("%s doctor -j --rdma-test --only rdma --sysroot %s/healthy | grep -q "
		 "'\"id\":\"rdmatest.loopback\".*\"status\":\"SKIP\"'", ctl, fx) == 0, "rdma-test");
}

static void cli_compare(void)
{
	/* an MTU mismatch between two nodes is a FAIL (here through --compare, the
	 * older spelling of doctor compare, kept for one release) */
	CHECK(sh("%s doctor -j --sysroot %s/mtu-1500 > %s/a.json; "
		 "%s doctor -j --sysroot %s/mtu-9000 > %s/b.json; "
		 "%s doctor -j --compare %s/a.json %s/b.json > %s/cmp.json",
		 ctl, fx, fx, ctl, fx, fx, ctl, fx, fx, fx) == 2, "compare exit");
	CHECK(sh("python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
		 "m=[c for c in d[\"checks\"] if c[\"id\"] == \"compare.mtu\"][0]; "
		 "assert m[\"status\"] == \"FAIL\" and \"1024\" in m[\"summary\"] and \"4096\" in m[\"summary\"], m; "
		 "assert \"mtu 9000\" in m[\"advice\"], m' %s/cmp.json", fx) == 0, "compare.mtu");
	CHECK(sh("%s doctor compare %s/a.json %s/b.json | grep -q '^FAIL  compare.mtu'",
		 ctl, fx, fx) == 0, "text");
	/* the same MTU everywhere: no MTU finding */
	CHECK(sh("%s doctor -j --sysroot %s/healthy > %s/c.json; "
		 "%s doctor -j compare %s/b.json %s/c.json | grep -q "
		 "'\"id\":\"compare.mtu\",\"check\":\"compare\",\"subject\":\"\",\"status\":\"PASS\"'",
		 ctl, fx, fx, ctl, fx, fx) == 0, "same mtu");
	/* different kernels: a WARN naming both */
	CHECK(sh("%s doctor -j --sysroot %s/strix-6.12 > %s/d.json; "
		 "%s doctor compare %s/c.json %s/d.json | grep -q '^WARN  compare.kernel.*6.12.38'",
		 ctl, fx, fx, ctl, fx, fx) == 0, "kernels");
	/* bad reports: a clear error, exit 3 */
	CHECK(sh("echo '{\"node\": {}, \"checks\": [' > %s/bad.json; "
		 "%s doctor compare %s/a.json %s/bad.json 2>&1 | grep -q 'bad.json: not JSON: line 2'",
		 fx, ctl, fx, fx) == 0, "truncated JSON");
	CHECK(sh("%s doctor compare %s/a.json %s/bad.json > /dev/null 2>&1", ctl, fx, fx) == 3,
	      "exit");
	CHECK(sh("echo '[1,2]' > %s/arr.json; %s doctor compare %s/a.json %s/arr.json 2>&1 | "
		 "grep -q 'not a report'", fx, ctl, fx, fx) == 0, "not a report");
	CHECK(sh("%s doctor compare %s/a.json > /dev/null 2>&1", ctl, fx) == 3, "one report");
	CHECK(sh("%s doctor compare %s/a.json /nonexistent.json > /dev/null 2>&1", ctl, fx) == 3,
	      "missing");
}

static void cli_valgrind_clean(void)
{
	if (sh("command -v valgrind > /dev/null") != 0)
		SKIP("valgrind not installed");
	CHECK(sh("valgrind -q --error-exitcode=99 --suppressions=tests/doctor/valgrind.supp --leak-check=full --errors-for-leak-kinds=definite "
		 "%s doctor --sysroot %s/broken > /dev/null 2> %s/vg1.txt", ctl, fx, fx) != 99,
	      "valgrind: see %s/vg1.txt", fx);
	CHECK(sh("valgrind -q --error-exitcode=99 --suppressions=tests/doctor/valgrind.supp --leak-check=full --errors-for-leak-kinds=definite "
		 "%s doctor -j --compare %s/a.json %s/b.json > /dev/null 2> %s/vg2.txt", ctl, fx, fx,
		 fx) != 99, "valgrind: see %s/vg2.txt", fx);
	/* the live system of the build host (no RDMA device there, usually) */
	CHECK(sh("valgrind -q --error-exitcode=99 --suppressions=tests/doctor/valgrind.supp --leak-check=full --errors-for-leak-kinds=definite "
		 "%s doctor > /dev/null 2> %s/vg3.txt", ctl, fx) != 99, "valgrind: see %s/vg3.txt",
	      fx);
}

#endif /* SP_DOCTOR_TEST_DT_CLI_H */
