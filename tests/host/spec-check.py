#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check that the netlink spec, the uapi header and the module agree.

docs/netlink/strixpeer.yaml is the source of truth. This compares it with
include/uapi/strixpeer.h (names and values of every command, attribute,
limit and feature bit, family and group names) and with kmod/netlink.c
(each request policy's attributes, types and range checks; which ops need
admin rights) and kmod/stats.c (the counter table: every stats attribute
exactly once, every struct sp_stats counter in it), and the library's mirror
of it: user/lib/ctl.c's sp_counter_table (every stats attribute once, into
the struct sp_counters field of its name) and <strixpeer/ctl.h>'s
struct sp_counters (a field per attribute, in the spec's order, so a new
counter is appended) and struct sp_config (a field per config attribute).
Prints TAP; exits 1 on any difference.
"""
import os
import re
import sys

import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SPEC = os.path.join(ROOT, "docs/netlink/strixpeer.yaml")
UAPI = os.path.join(ROOT, "include/uapi/strixpeer.h")
UAPI_NL = os.path.join(ROOT, "include/uapi/strixpeer_nl.h")
KMOD = os.path.join(ROOT, "kmod/netlink.c")
STATS = os.path.join(ROOT, "kmod/stats.c")
KHDR = os.path.join(ROOT, "kmod/strixpeer.h")
LIBCTL = os.path.join(ROOT, "user/lib/ctl.c")
PUBCTL = os.path.join(ROOT, "include/strixpeer/ctl.h")

NLA = {"u8": "NLA_U8", "u16": "NLA_U16", "u32": "NLA_U32", "u64": "NLA_U64",
       "s32": "NLA_S32", "s64": "NLA_S64", "string": "NLA_NUL_STRING",
       "nest": "NLA_NESTED"}


def c_name(*parts):
    return "_".join(p.upper().replace("-", "_") for p in parts)


def uapi_enums(text):
    """All enum constants of the header with their values."""
    values = {}
    for body in re.findall(r"enum\s*\w*\s*\{(.*?)\};", text, re.S):
        nxt = 0
        for item in body.split(","):
            item = re.sub(r"/\*.*?\*/", "", item, flags=re.S).strip()
            if not item:
                continue
            m = re.match(r"(\w+)\s*(?:=\s*(.+))?$", item, re.S)
            if not m:
                continue
            name, val = m.group(1), m.group(2)
            if val is not None:
                val = val.strip()
                if re.fullmatch(r"\d+", val):
                    nxt = int(val)
                elif val.startswith("("):
                    continue        # the *_MAX = (__X_MAX - 1) aliases
            values[name] = nxt
            nxt += 1
    return values


def main():
    spec = yaml.safe_load(open(SPEC))
    # the hand-written header and the one YNL generates from the spec
    # (tests/host/ynl-gen.sh --check compares that one with the generator)
    uapi = open(UAPI).read() + open(UAPI_NL).read()
    kmod = open(KMOD).read()
    enums = uapi_enums(uapi)
    results = []

    def check(name, problems):
        results.append((name, problems))

    # family and group names
    p = []
    if not re.search(r'#define STRIXPEER_FAMILY_NAME\s+"%s"' % spec["name"], uapi) or \
            not re.search(r"#define STRIXPEER_GENL_NAME\s+STRIXPEER_FAMILY_NAME", uapi):
        p.append("STRIXPEER_GENL_NAME is not \"%s\"" % spec["name"])
    for g in spec["mcast-groups"]["list"]:
        if not re.search(r'#define STRIXPEER_MCGRP_%s\s+"%s"' % (c_name(g["name"]), g["name"]), uapi):
            p.append("no STRIXPEER_MCGRP_%s \"%s\"" % (c_name(g["name"]), g["name"]))
    check("family_and_groups", p)

    # definitions: flags -> FEAT bits, enums -> values
    p = []
    consts = {}
    for d in spec.get("definitions", []):
        entries = [e["name"] if isinstance(e, dict) else e for e in d.get("entries", [])]
        if d["type"] == "const":
            consts[d["name"]] = d["value"]
            name = c_name("strixpeer", d["name"])
            if not re.search(r"#define %s\s+\(?%d\)?\n" % (name, d["value"]), uapi):
                p.append("%s is not %d" % (name, d["value"]))
        elif d["type"] == "flags":
            for bit, e in enumerate(entries):
                name = "STRIXPEER_FEAT_" + c_name(e)
                if not re.search(r"#define %s\s+\(1ULL << %d\)" % (name, bit), uapi):
                    p.append("%s is not bit %d" % (name, bit))
        elif d["type"] == "enum":
            start = d.get("value-start", 0)
            for i, e in enumerate(entries):
                name = c_name("strixpeer", d["name"], e)
                if enums.get(name) != start + i:
                    p.append("%s = %s, spec says %d" % (name, enums.get(name), start + i))
    check("definitions", p)

    # attribute sets
    p = []
    sets = {}
    for s in spec["attribute-sets"]:
        sets[s["name"]] = {a["name"]: a for a in s["attributes"]}
        if "subset-of" in s:
            continue        # the parent's attributes and ids
        for i, a in enumerate(s["attributes"]):
            name = c_name("strixpeer_a", s["name"], a["name"])
            if enums.get(name) != i + 1:
                p.append("%s = %s, spec says %d" % (name, enums.get(name), i + 1))
        maxname = c_name("__strixpeer_a", s["name"], "max")
        if enums.get(maxname) != len(s["attributes"]) + 1:
            p.append("%s = %s, spec has %d attributes" % (maxname, enums.get(maxname),
                                                          len(s["attributes"])))
    check("attribute_sets", p)

    # commands
    p = []
    ops = spec["operations"]["list"]
    for i, op in enumerate(ops):
        name = c_name("strixpeer_cmd", op["name"])
        if enums.get(name) != i + 1:
            p.append("%s = %s, spec says %d" % (name, enums.get(name), i + 1))
    check("commands", p)

    # policies and permissions in the module
    p = []
    for op in ops:
        if "event" in op:
            continue
        attrs = []
        for kind in ("do", "dump"):
            req = op.get(kind, {}) or {}
            for a in (req.get("request", {}) or {}).get("attributes", []):
                if a not in attrs:
                    attrs.append(a)
        pname = "strixpeer_%s_nl_policy" % op["name"].replace("-", "_")
        m = re.search(r"%s\[[^\]]*\] = \{(.*?)\n\};" % pname, kmod, re.S)
        if not attrs:
            if m:
                p.append("%s exists but %s takes no attributes" % (pname, op["name"]))
        elif not m:
            p.append("no %s for %s" % (pname, op["name"]))
        else:
            entries = dict(re.findall(r"\[(STRIXPEER_A_\w+)\]\s*=\s*(.+?),\n", m.group(1) + "\n"))
            aset = sets[op["attribute-set"]]
            want = {c_name("strixpeer_a", op["attribute-set"], a): a for a in attrs}
            for cname, a in want.items():
                if cname not in entries:
                    p.append("%s lacks %s" % (pname, cname))
                    continue
                ent = entries[cname]
                spec_attr = aset[a]
                if NLA[spec_attr["type"]] not in ent:
                    p.append("%s: %s is %s, spec says %s" % (pname, cname, ent, spec_attr["type"]))
                checks = spec_attr.get("checks", {})
                lo, hi = checks.get("min"), checks.get("max")
                lo, hi = consts.get(lo, lo), consts.get(hi, hi)
                for cn, cv in consts.items():       # a bound may be a const's name
                    ent = ent.replace(c_name("strixpeer", cn), str(cv))
                if lo is not None and hi is not None:
                    ok = re.search(r"NLA_POLICY_RANGE\(\w+,\s*%d,\s*%d\)" % (lo, hi), ent)
                elif lo is not None:
                    ok = re.search(r"NLA_POLICY_MIN\(\w+,\s*%d\)" % lo, ent)
                elif hi is not None:
                    ok = re.search(r"NLA_POLICY_MAX\(\w+,\s*%d\)" % hi, ent)
                else:
                    ok = "NLA_POLICY" not in ent
                if not ok:
                    p.append("%s: %s checks %s, spec says %s" % (pname, cname, ent, checks))
            for cname in entries:
                if cname not in want:
                    p.append("%s has %s, not in the spec's request" % (pname, cname))
        # A policy is used by its genl_ops entry (.policy) or parsed by
        # the handler itself (config-set: privilege before range checks).
        if m and not re.search(r"(\.policy = |nlmsg_parse\([^;]*)%s\b" % pname, kmod):
            p.append("%s is neither an op's .policy nor parsed by a handler" % pname)
        block = re.search(r"\.cmd = %s,(.*?)\n\t\}" % c_name("strixpeer_cmd", op["name"]),
                          kmod, re.S)
        if not block:
            p.append("no genl_ops entry for %s" % op["name"])
            continue
        admin = "admin-perm" in op.get("flags", [])
        if admin != ("GENL_ADMIN_PERM" in block.group(1)):
            p.append("%s: admin-perm %s in spec, not in the module" % (op["name"], admin))
        if op.get("dump") and ".dumpit" not in block.group(1):
            p.append("%s: spec has a dump, the module none" % op["name"])
    check("module_policies_and_permissions", p)

    # counters: stats.c's table and netlink.c's stats-get reply carry every
    # attribute of the stats set once; every counter of struct sp_stats is
    # in the table
    p = []
    table = re.findall(r"\{ (NULL|\"\w+\"), (STRIXPEER_A_STATS_\w+),\s*&sp_stats\.(\w+) \}",
                       open(STATS).read())
    body = re.search(r"struct sp_stats \{(.*?)\n\};", open(KHDR).read(), re.S)
    fields = re.findall(r"atomic64_t (\w+);", body.group(1)) if body else []
    seen = [t[1] for t in table]
    seen += re.findall(r"sp_stats_put\(msg\) \|\|\s*nla_put_u64_64bit\(msg, (STRIXPEER_A_STATS_\w+)",
                       kmod)
    for a in sets["stats"].values():
        if a["type"] == "pad":
            continue
        cname = c_name("strixpeer_a_stats", a["name"])
        if seen.count(cname) != 1:
            p.append("%s is put %d times by the stats-get reply" % (cname, seen.count(cname)))
    for f in fields:
        if f not in [t[2] for t in table]:
            p.append("struct sp_stats.%s is not in stats.c's sp_stat_table" % f)
    for t in table:
        if t[2] not in fields:
            p.append("sp_stat_table names sp_stats.%s, not a counter" % t[2])
        if t[0] != "NULL" and t[0].strip('"') != t[2]:
            p.append("sysfs file %s shows sp_stats.%s" % (t[0], t[2]))
    if not table or not fields:
        p.append("no counter table in kmod/stats.c or no struct sp_stats")
    check("counters_table", p)

    # the library's counters: ctl.c's table and struct sp_counters mirror
    # the stats set (the kernel's table, checked above)
    p = []
    attrs = [c_name("strixpeer_a_stats", a["name"]) for a in sets["stats"].values()
             if a["type"] != "pad"]
    names = [a["name"].replace("-", "_") for a in sets["stats"].values() if a["type"] != "pad"]
    ltable = re.findall(r"SP_CTR\(([A-Z0-9_]+), (\w+)\)", open(LIBCTL).read())
    lattrs = ["STRIXPEER_A_STATS_" + t[0] for t in ltable]
    pub = open(PUBCTL).read()
    body = re.search(r"struct sp_counters \{(.*?)\n\};", pub, re.S)
    sfields = re.findall(r"uint\d+_t (\w+);", body.group(1)) if body else []
    for a, n in zip(attrs, names):
        if lattrs.count(a) != 1:
            p.append("%s is in ctl.c's sp_counter_table %d times" % (a, lattrs.count(a)))
        elif ltable[lattrs.index(a)][1] != n:
            p.append("sp_counter_table puts %s into .%s, not .%s" % (a, ltable[lattrs.index(a)][1], n))
    for t in ltable:
        if "STRIXPEER_A_STATS_" + t[0] not in attrs:
            p.append("sp_counter_table names STRIXPEER_A_STATS_%s, not a stats attribute" % t[0])
    if sfields[:2] != ["size", "reserved"]:
        p.append("struct sp_counters does not start with size, reserved")
    if sfields[2:] != names:
        p.append("struct sp_counters fields %s are not the stats attributes in order %s"
                 % (sfields[2:], names))
    body = re.search(r"struct sp_config \{(.*?)\n\};", pub, re.S)
    cfields = re.findall(r"(?:uint\d+_t|int) (\w+);", body.group(1)) if body else []
    for a in sets["config"].values():
        if a["type"] != "pad" and a["name"].replace("-", "_") not in cfields:
            p.append("struct sp_config has no %s" % a["name"].replace("-", "_"))
    if not ltable or not sfields or not cfields:
        p.append("no sp_counter_table in user/lib/ctl.c or no struct sp_counters/sp_config")
    check("library_counters_mirror_spec", p)

    print("TAP version 13")
    print("1..%d" % len(results))
    failed = 0
    for i, (name, problems) in enumerate(results, 1):
        for prob in problems:
            print("# " + prob)
        print("%s %d %s" % ("not ok" if problems else "ok", i, name))
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
