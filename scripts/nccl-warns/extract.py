#!/usr/bin/env python3
"""Build ringlab's table of NCCL trouble messages from NCCL's own source.

    python3 scripts/nccl-warns/extract.py /path/to/nccl/mirror

MIRROR is a git directory (bare or not) of github.com/NVIDIA/nccl holding the release tags in
TAGS. For each tag the script reads every C/C++/CUDA file under src/ straight from git (no
checkout), tokenises it (comments, string and character literals, backslash-newline splices,
preprocessor lines) and collects

  * every WARN(...) call, including those inside #define bodies (CUDACHECK, SYSCHECK, ... in
    include/*.h) and calls spread over several lines; the site is the line of the WARN token;
  * the INFO(...) calls that matter when reading a failure (INFO_PATTERNS): the `file:line -> N`
    error trace, "No device found", "Using network ...", network-plugin load failures,
    connect/accept retries, "no interface found in the same subnet", "no socket interface".

The format is the first argument of WARN and the second of INFO: adjacent string literals are
concatenated and C escapes decoded (so "\\n" becomes a newline, as printf sees it); the <inttypes.h>
macros become what glibc on x86-64 defines them as (PRIx64 -> "lx", PRIu32 -> "u", ...); an
object-like macro defined at that tag as nothing but string literals is substituted, and so is
STR(MACRO) stringification (#define STR2(v) #v / #define STR(v) STR2(v)). A format built from a
function-like macro's parameters -- SYSCHECK(call, "name") makes "Call to " name " failed: %s",
likewise PTHREADCHECK, the verbs and mlx5 wrappers in misc/ibvwrap.cc and misc/mlx5dvwrap.cc, and
NVMLCHECK's `#name` -- is expanded at every use of the macro (through nested macros), and each use
is a site of its own: the line of the macro's name at the use, which is also the file:line the
log prints. A format that is still not a literal (a variable) is skipped and reported. Calls inside
`#if 0` blocks are never compiled, so they are left out and reported too.

It then writes (or merges into) src/nccl_log/warnings.toml: one [[msg]] row per distinct
(level, format) over all tags. Rows already in the file keep their hand-written fields (id,
family, severity, meaning, causes, fix, confirm); the generated fields (releases, sites) are
recomputed. [[family]] tables are kept as they are. A new row gets a family from the path of its
newest site (FAMILY_RULES) and a severity from NOTE_PATTERNS; both are meant to be reviewed.
Rows whose format no longer occurs at any tag are dropped, and the script names them.

It also writes src/nccl_log/warns-v2.28.9.txt: one line per live WARN site at the newest tag (a
literal WARN, or a use of a macro whose WARN format it completes), `file:line<TAB>format`, sorted by file then line number; in that file a
backslash is written `\\\\`, a newline `\\n`, a tab `\\t` and a carriage return `\\r`.

Python 3.11+, standard library only.
"""

from __future__ import annotations

import argparse
import bisect
import re
import subprocess
import sys
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

TAGS = [
    "v2.4.8-1", "v2.5.7-1", "v2.6.4-1", "v2.7.8-1", "v2.8.4-1", "v2.9.9-1", "v2.10.3-1",
    "v2.11.4-1", "v2.12.12-1", "v2.13.4-1", "v2.14.3-1", "v2.15.5-1", "v2.16.5-1", "v2.17.1-1",
    "v2.18.6-1", "v2.19.4-1", "v2.20.5-1", "v2.21.5-1", "v2.22.3-1", "v2.23.4-1", "v2.24.3-1",
    "v2.25.1-1", "v2.26.6-1", "v2.27.7-1", "v2.28.9-1",
]

SOURCE_EXTS = {".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".inl"}

# <inttypes.h> as glibc defines it on LP64 (x86-64, aarch64): 64-bit types are `long`.
PRI_MACROS = {}
for _kind in "diouxX":
    PRI_MACROS[f"PRI{_kind}8"] = _kind
    PRI_MACROS[f"PRI{_kind}16"] = _kind
    PRI_MACROS[f"PRI{_kind}32"] = _kind
    PRI_MACROS[f"PRI{_kind}64"] = "l" + _kind
    PRI_MACROS[f"PRI{_kind}PTR"] = "l" + _kind
    PRI_MACROS[f"PRI{_kind}MAX"] = "l" + _kind
    for _w in ("8", "16", "32"):
        PRI_MACROS[f"PRI{_kind}LEAST{_w}"] = _kind
    PRI_MACROS[f"PRI{_kind}LEAST64"] = "l" + _kind
    PRI_MACROS[f"PRI{_kind}FAST8"] = _kind
    for _w in ("16", "32", "64"):
        PRI_MACROS[f"PRI{_kind}FAST{_w}"] = "l" + _kind

# INFO lines worth a row: the ones a reader of a failed run needs to recognise.
INFO_PATTERNS = [
    re.compile(r"^%s:%d -> %d"),                       # NCCLCHECK & co: the error trace
    re.compile(r"No device found"),                    # NET/IB : No device found.
    re.compile(r"^Using network "),                    # which network transport was picked
    re.compile(r"libnccl-net"),
    # plugin (net, collnet, tuner, profiler, env) not found or not loadable
    re.compile(r"(?i)^(NET|TUNER|PROFILER|ENV|GIN|%s)/Plugin ?: ?(.*(no plugin found|could not find"
               r"|failed to find|load returned|load \(%s\) returned|dlerror|also failed)|%s(: %s)?$)"),
    re.compile(r"^Tuner: (no plugin found|plugin load|failed to find)"),
    re.compile(r"^External .*plugin %s is unsupported|^Failed to initialize NET plugin"),
    re.compile(r"(?i)retrying"),                       # connect/accept/modify_qp retries
    re.compile(r"(?i)same subnet"),
    re.compile(r"(?i)no socket interface"),
]

# A new row's family, from the path (relative to src/) of its newest site; first match wins.
# Format rules come first: a few messages live in shared headers but belong elsewhere.
FAMILY_FORMAT_RULES = [
    (re.compile(r"^%s:%d -> %d"), "error-trace"),
    (re.compile(r"^Cuda failure|^CUDA failure|^GDRCOPY failure"), "cuda"),
    (re.compile(r"(?i)^(NET|%s)/Plugin|^Using network |^External network plugin|NET plugin"), "net-plugin"),
    (re.compile(r"(?i)^(TUNER/Plugin|Tuner: )"), "tuner-plugin"),
    (re.compile(r"(?i)^(PROFILER|ENV)/Plugin"), "profiler-plugin"),
    # SYSCHECK(call, "name") on calls not tied to one subsystem
    (re.compile(r"^Call to (close|read|write|fcntl|stat|getrlimit|setrlimit|pthread_\w+|sched_\w+"
                r"|clock_gettime|pipe) "), "syscall"),
]
FAMILY_RULES = [
    (r"^(transport/net_ib|transport/net_ib/|misc/ibvwrap|misc/ibvsymbols|include/ibv|include/mlx5|misc/mlx5dv)", "ib"),
    (r"^(transport/gdaki/|gin/|include/gin/|transport/net_ib_gin)", "gin"),
    (r"^(misc/socket|include/socket|transport/net_socket|misc/net_socket)", "socket"),
    (r"^bootstrap", "bootstrap"),
    (r"^(net\.cc|plugin/net|plugin/plugin_open|plugin/plugin|include/net\.h|include/plugin/net|include/nccl_net)", "net-plugin"),
    (r"^(plugin/profiler|misc/profiler|include/profiler|include/plugin/profiler|plugin/env|include/plugin/env)", "profiler-plugin"),
    (r"^(plugin/tuner|misc/tuner|include/tuner|include/plugin/tuner)", "tuner-plugin"),
    (r"^transport/coll_net", "collnet"),
    (r"^transport/net", "net-transport"),
    (r"^(transport/shm|misc/shmutils|include/shm)", "shm"),
    (r"^(transport/p2p|misc/ipcsocket|include/ipcsocket|include/p2p)", "p2p"),
    (r"^(transport/nvls|misc/mnnvl|include/mnnvl|include/nvls|mnnvl)", "nvls"),
    (r"^register/", "register"),
    (r"^(dev_runtime|scheduler/symmetric|symmetric|include/symmetric|include/dev_runtime|allocator)", "symmetric"),
    (r"^(ras/|include/ras)", "ras"),
    (r"^(proxy|include/proxy|transport/generic)", "proxy"),
    (r"^(include/alloc|misc/alloc)", "alloc"),
    (r"^(include/cudawrap|misc/cudawrap|include/checks|misc/strongstream|include/strongstream|include/gdrwrap|misc/gdrwrap|include/cuda)", "cuda"),
    (r"^(include/nvmlwrap|misc/nvmlwrap)", "nvml"),
    (r"^(misc/argcheck|include/argcheck|collectives|include/collectives)", "usage"),
    (r"^(enqueue|include/enqueue|ce_coll|misc/ce|include/ce)", "enqueue"),
    (r"^(group|misc/group|include/group)", "group"),
    (r"^(misc/param|include/param|debug|misc/debug|include/debug)", "env"),
    (r"^(graph/|include/graph|include/xml|include/topo)", "topology"),
    (r"^misc/rings", "topology"),
    (r"^(init|channel|transport\.cc|include/comm|misc/utils|include/utils|misc/nvtx|include/nvtx|commDump|misc/shrink|include/channel|misc/rocmwrap|include/transport)", "init"),
]
FAMILY_RULES = [(re.compile(p), f) for p, f in FAMILY_RULES]

# A new row is a note (benign on a healthy system) when its format matches one of these.
NOTE_PATTERNS = [
    re.compile(r"^Using network "),
    re.compile(r"No device found"),
    re.compile(r"(?i)retrying"),
    re.compile(r"(?i)/Plugin ?:"),
    re.compile(r"libnccl-net"),
]

LEVELS = ("WARN", "INFO")
HAND_FIELDS = ("id", "family", "severity", "meaning", "causes", "fix", "confirm")
FAMILY_FIELDS = ("id", "title", "meaning", "causes", "fix", "confirm")

HEADER = """\
# NCCL's trouble messages: every WARN format and the INFO lines that matter when reading a
# failure, over the NCCL releases 2.4 to 2.28 (the newest patch of each minor).
#
# Generated and merged by scripts/nccl-warns/extract.py; to refresh after a new NCCL release,
# add its tag to TAGS in the script and run
#     python3 scripts/nccl-warns/extract.py /path/to/nccl/mirror
# (MIRROR: a git clone of github.com/NVIDIA/nccl with its tags). The script recomputes
# `releases` and `sites` of every row and adds rows for new formats; what was written by hand
# (the [[family]] tables, and a row's id, family, severity, meaning, causes, fix, confirm) is
# kept. A row is keyed by (level, format).
#
# level:    WARN, or INFO for the few INFO lines listed in the script (error trace, retries,
#           network and plugin selection).
# format:   the printf format exactly as NCCL passes it (literals concatenated, escapes decoded,
#           PRIx64 -> lx and the like); a WARN line prints "<file>:<line> NCCL WARN " + format.
# releases: the minors among the scanned tags whose source holds this exact format.
# sites:    "<version> <file>:<line>" for each site at each scanned tag, newest first; the path
#           is relative to src/ and the line is that of the WARN/INFO token. For a call inside a
#           macro with a literal format (CUDACHECK, NCCLCHECK...) the site is the macro's body,
#           while the log shows the file:line where the macro is used. A format completed by a
#           macro's argument (SYSCHECK(call, "name") -> "Call to name failed: %s", the verbs
#           wrappers) has one site per use of the macro, at the line of that use.
# severity: error (a real problem) or note (benign on a healthy system, or informational).
# A row's meaning/causes/fix/confirm, where present, override its family's.
"""


# ---------------------------------------------------------------------------------------------
# Lexing


@dataclass
class Tok:
    kind: str       # id, str, chr, num, punct
    text: str
    line: int       # physical line, 1-based
    directive: int  # index of the preprocessor directive the token is in, or -1
    end: int = 0    # offset just past the token in the spliced text
    start: int = 0  # offset of the token in the spliced text


@dataclass
class Directive:
    name: str                  # define, if, ifdef, ...
    toks: list                 # its tokens after the name
    macro: str | None = None   # for define: the macro's name
    params: list | None = None  # for a function-like define: its parameters


TOKEN_RE = re.compile(
    r"""
    (?P<nl>\n)
  | (?P<ws>[ \t\r\f\v]+)
  | (?P<lcom>//[^\n]*)
  | (?P<bcom>/\*.*?\*/)
  | (?P<str>(?:u8|u|U|L)?"(?:[^"\\\n]|\\.)*")
  | (?P<chr>(?:u8|u|U|L)?'(?:[^'\\\n]|\\.)*')
  | (?P<id>[A-Za-z_]\w*)
  | (?P<num>\.?\d(?:[eEpP][+-]|[\w.])*)
  | (?P<punct>\.\.\.|->|::|\#\#|<<=|>>=|[-+*/%&|^<>=!]=|&&|\|\||<<|>>|\+\+|--|.)
    """,
    re.VERBOSE | re.DOTALL,
)

SPLICE_RE = re.compile(r"\\\r?\n")


class Lexed:
    """The tokens of one file, with its preprocessor directives and `#if 0` regions."""

    def __init__(self, text: str):
        # Phase 2: remove backslash-newline, remembering where, to give tokens physical lines.
        self.splices = []  # offsets (in the spliced text) where a splice was removed
        parts = []
        pos = 0
        removed = 0
        for m in SPLICE_RE.finditer(text):
            parts.append(text[pos:m.start()])
            removed += m.start() - pos
            self.splices.append(removed)
            pos = m.end()
        parts.append(text[pos:])
        src = "".join(parts)
        self.newlines = [m.start() for m in re.finditer(r"\n", src)]

        self.toks: list[Tok] = []
        self.directives: list[Directive] = []
        self.dead: list[bool] = []  # per token: inside an `#if 0` region
        at_line_start = True
        cur_dir = -1
        cond_stack = []  # per open #if: "dead" (inside #if 0), "live-after-dead", or "live"
        dead_depth = 0
        dir_toks = None
        for m in TOKEN_RE.finditer(src):
            kind = m.lastgroup
            if kind == "nl":
                if cur_dir >= 0:
                    dead_depth = self._close_directive(cond_stack, dead_depth)
                cur_dir = -1
                at_line_start = True
                continue
            if kind in ("ws", "lcom"):
                continue
            if kind == "bcom":
                # a block comment may span lines; a directive ends at the first real newline
                if cur_dir >= 0 and "\n" in m.group():
                    dead_depth = self._close_directive(cond_stack, dead_depth)
                    cur_dir = -1
                    at_line_start = True
                continue
            text_ = m.group()
            line = self._line_of(m.start())
            if at_line_start and kind == "punct" and text_ == "#":
                self.directives.append(Directive(name="", toks=[]))
                cur_dir = len(self.directives) - 1
                at_line_start = False
                continue
            at_line_start = False
            tok = Tok(kind, text_, line, cur_dir, m.end(), m.start())
            if cur_dir >= 0:
                d = self.directives[cur_dir]
                if not d.name:
                    d.name = text_
                    continue
                d.toks.append(tok)
            self.toks.append(tok)
            self.dead.append(dead_depth > 0)
        if cur_dir >= 0:
            self._close_directive(cond_stack, dead_depth)
        for d in self.directives:
            if d.name == "define" and d.toks and d.toks[0].kind == "id":
                d.macro = d.toks[0].text
                # function-like when "(" follows the name with no space between
                if src[d.toks[0].end:d.toks[0].end + 1] == "(":
                    params = []
                    for t in d.toks[2:]:
                        if t.text == ")":
                            break
                        if t.kind == "id" or t.text == "...":
                            params.append(t.text)
                    d.params = params

    def _line_of(self, off: int) -> int:
        return bisect.bisect_left(self.newlines, off) + bisect.bisect_right(self.splices, off) + 1

    def _close_directive(self, cond_stack, dead_depth):
        d = self.directives[-1]
        name = d.name
        cond = " ".join(t.text for t in d.toks)
        if name in ("if", "ifdef", "ifndef"):
            if dead_depth > 0:
                cond_stack.append("nested-dead")
                dead_depth += 1
            elif name == "if" and cond in ("0", "(0)"):
                cond_stack.append("dead")
                dead_depth += 1
            else:
                cond_stack.append("live")
        elif name in ("else", "elif"):
            if cond_stack and cond_stack[-1] == "dead":
                cond_stack[-1] = "live-after-dead"
                dead_depth -= 1
        elif name == "endif":
            if cond_stack:
                top = cond_stack.pop()
                if top in ("dead", "nested-dead"):
                    dead_depth -= 1
        return dead_depth


ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
           "\\": "\\", "'": "'", '"': '"', "?": "?"}


def decode_c_string(lit: str) -> str:
    body = lit[lit.index('"') + 1:-1]
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n in ESCAPES:
            out.append(ESCAPES[n])
            i += 2
        elif n in "01234567":
            j = i + 1
            while j < len(body) and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(chr(int(body[i + 1:j], 8)))
            i = j
        elif n == "x":
            j = i + 2
            while j < len(body) and body[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(chr(int(body[i + 2:j], 16)))
            i = j
        else:
            out.append(n)
            i += 2
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Finding calls


@dataclass
class Site:
    tag: str
    path: str   # relative to src/
    line: int


@dataclass
class Skipped:
    tag: str
    path: str
    line: int
    level: str
    arg: str
    why: str


def split_args(toks, open_idx):
    """Arguments (lists of tokens) of the call whose "(" is toks[open_idx]; None if unclosed."""
    depth = 0
    args = [[]]
    for i in range(open_idx, len(toks)):
        t = toks[i]
        if t.kind == "punct" and t.text in "([{":
            depth += 1
            if depth == 1:
                continue
        elif t.kind == "punct" and t.text in ")]}":
            depth -= 1
            if depth == 0:
                return args
        elif t.kind == "punct" and t.text == "," and depth == 1:
            args.append([])
            continue
        args[-1].append(t)
    return None


class Macros:
    """What the format evaluator needs to know of a tag's #defines."""

    def __init__(self, lexed_files):
        obj = defaultdict(set)   # object-like: name -> set of body token texts
        self.defs = {}           # function-like: name -> (params, body tokens), None if several
        for lx in lexed_files:
            for d in lx.directives:
                if d.name != "define" or d.macro is None:
                    continue
                body = d.toks[1:]
                if d.params is None:
                    obj[d.macro].add(tuple((t.kind, t.text) for t in body))
                else:
                    close = next(i for i, t in enumerate(body) if t.text == ")")
                    key = (tuple(d.params), tuple((t.kind, t.text) for t in body[close + 1:]))
                    if d.macro in self.defs and self.defs[d.macro] != key:
                        self.defs[d.macro] = None
                    else:
                        self.defs[d.macro] = key
        self.obj = {}  # name -> body (tuple of (kind, text)), None when defined several ways
        for name, bodies in obj.items():
            self.obj[name] = next(iter(bodies)) if len(bodies) == 1 else None

    def string(self, name, depth=0):
        """An object-like macro made of string literals (and PRI macros) only: its value."""
        body = self.obj.get(name)
        if not body or depth > 8:
            return None
        out = []
        for kind, text in body:
            if kind == "str" and text.startswith('"'):
                out.append(decode_c_string(text))
            elif kind == "id" and text in PRI_MACROS:
                out.append(PRI_MACROS[text])
            elif kind == "id" and self.string(text, depth + 1) is not None:
                out.append(self.string(text, depth + 1))
            else:
                return None
        return "".join(out)

    def stringify_kind(self, name):
        """'direct' for `#define S(v) #v`, 'expand' for `#define S(v) D(v)` with D direct."""
        d = self.defs.get(name)
        if not d:
            return None
        params, body = d
        if len(params) != 1:
            return None
        if body == (("punct", "#"), ("id", params[0])):
            return "direct"
        if (len(body) == 4 and body[0][0] == "id" and body[1][1] == "(" and body[2] == ("id", params[0])
                and body[3][1] == ")" and self.stringify_kind(body[0][1]) == "direct"):
            return "expand"
        return None

    def expand_ident(self, name, depth=0):
        """An identifier through object-like macros whose body is one token."""
        body = self.obj.get(name)
        if depth > 8 or not body or len(body) != 1:
            return name
        kind, text = body[0]
        return self.expand_ident(text, depth + 1) if kind == "id" else text


def eval_format(arg, macros, params):
    """The format string of an argument (a token list), or (None, why)."""
    if not arg:
        return None, "empty"
    out = []
    i = 0
    while i < len(arg):
        t = arg[i]
        if t.kind == "str":
            if not t.text.startswith('"'):
                return None, "wide or prefixed string literal"
            out.append(decode_c_string(t.text))
        elif t.kind == "id" and t.text in PRI_MACROS:
            out.append(PRI_MACROS[t.text])
        elif t.kind == "id" and params is not None and t.text in params:
            return None, f"macro parameter `{t.text}`"
        elif t.kind == "punct" and t.text == "#" and params is not None:
            return None, "stringified macro parameter"
        elif t.kind == "id" and macros.string(t.text) is not None:
            out.append(macros.string(t.text))
        elif (t.kind == "id" and macros.stringify_kind(t.text) and i + 3 < len(arg)
              and arg[i + 1].text == "(" and arg[i + 2].kind == "id" and arg[i + 3].text == ")"):
            # STR(NCCL_PLUGIN_SYMBOL): the (expanded) identifier, as a string
            name = arg[i + 2].text
            if macros.stringify_kind(t.text) == "expand":
                name = macros.expand_ident(name)
            out.append(name)
            i += 4
            continue
        else:
            return None, "not a string literal"
        i += 1
    return "".join(out), None


def info_selected(fmt: str) -> bool:
    return any(p.search(fmt) for p in INFO_PATTERNS)


@dataclass
class Template:
    """A WARN/INFO in a function-like macro whose format is built from the macro's arguments."""
    level: str
    macro: str
    params: list
    fmt: list       # the format argument's tokens
    path: str       # where the WARN/INFO is
    line: int


def stringify(toks):
    out = []
    for k, t in enumerate(toks):
        if k and t.start > toks[k - 1].end:
            out.append(" ")
        if t.kind in ("str", "chr"):
            out.append(t.text.replace("\\", "\\\\").replace('"', '\\"'))
        else:
            out.append(t.text)
    return '"' + "".join(out) + '"'


def substitute(fmt_toks, binding):
    out = []
    i = 0
    while i < len(fmt_toks):
        t = fmt_toks[i]
        if (t.kind == "punct" and t.text == "#" and i + 1 < len(fmt_toks)
                and fmt_toks[i + 1].text in binding):
            arg = binding[fmt_toks[i + 1].text]
            out.append(Tok("str", stringify(arg), t.line, -1))
            i += 2
            continue
        if t.kind == "id" and t.text in binding:
            out.extend(binding[t.text])
        else:
            out.append(t)
        i += 1
    return out


class Scan:
    """Everything found over the tags."""

    def __init__(self):
        self.found = defaultdict(list)  # (level, format) -> [Site]
        self.skipped: list[Skipped] = []
        self.dead: list[Skipped] = []
        self.expanded = defaultdict(set)  # (level, path, macro, raw format) -> tags

    def call(self, tag, rel, line, level, fmt, dead):
        if level == "INFO" and not info_selected(fmt):
            return
        if dead:
            self.dead.append(Skipped(tag, rel, line, level, fmt, "inside #if 0"))
        else:
            self.found[(level, fmt)].append(Site(tag, rel, line))

    def not_literal(self, tag, rel, line, level, arg, why, dead):
        if level == "INFO":
            # only INFO calls matching INFO_PATTERNS matter; judge on the literal pieces
            pieces = "".join(decode_c_string(a.text) for a in arg if a.kind == "str")
            if not info_selected(pieces):
                return
        raw = " ".join(a.text for a in arg)
        (self.dead if dead else self.skipped).append(Skipped(tag, rel, line, level, raw, why))


def enclosing_define(lx, tok):
    if tok.directive < 0:
        return None
    d = lx.directives[tok.directive]
    return d if d.name == "define" else None


def scan_file(tag, path, lx: Lexed, macros, scan: Scan, templates):
    toks = lx.toks
    rel = path[len("src/"):]
    for i, t in enumerate(toks):
        if t.kind != "id" or t.text not in LEVELS:
            continue
        if i + 1 >= len(toks) or toks[i + 1].text != "(":
            continue
        if i > 0 and toks[i - 1].text in (".", "->", "::"):
            continue
        if t.directive >= 0 and lx.directives[t.directive].name != "define":
            continue
        d = enclosing_define(lx, t)
        if d is not None and d.macro == t.text and d.toks and d.toks[0] is t:
            continue  # the definition of WARN/INFO itself
        params = d.params if d is not None else None
        args = split_args(toks, i + 1)
        if args is None:
            scan.skipped.append(Skipped(tag, rel, t.line, t.text, "", "unterminated call"))
            continue
        level = t.text
        if level == "WARN":
            arg = args[0]
        else:
            if len(args) < 2:
                continue
            arg = args[1]
        fmt, why = eval_format(arg, macros, params)
        if fmt is not None:
            scan.call(tag, rel, t.line, level, fmt, lx.dead[i])
        elif params is not None and why.startswith(("macro parameter", "stringified")):
            templates.append(Template(level, d.macro, params, arg, rel, t.line))
        else:
            scan.not_literal(tag, rel, t.line, level, arg, why, lx.dead[i])


def expand_templates(tag, lexed, macros, scan: Scan, templates, depth=0):
    """Formats built from macro arguments, one per use of the macro; the site is the use."""
    more = []
    for tpl in templates:
        uses = 0
        for path, lx in lexed.items():
            rel = path[len("src/"):]
            toks = lx.toks
            for i, t in enumerate(toks):
                if t.kind != "id" or t.text != tpl.macro or i + 1 >= len(toks) or toks[i + 1].text != "(":
                    continue
                d = enclosing_define(lx, t)
                if d is not None and d.toks and d.toks[0] is t:
                    continue  # its own definition
                if t.directive >= 0 and d is None:
                    continue  # #ifdef NAME and the like
                args = split_args(toks, i + 1)
                if args is None:
                    continue
                binding = {}
                for k, p in enumerate(tpl.params):
                    if p == "...":
                        rest = []
                        for a in args[k:]:
                            if rest:
                                rest.append(Tok("punct", ",", t.line, -1))
                            rest.extend(a)
                        binding["__VA_ARGS__"] = rest
                    elif k < len(args):
                        binding[p] = args[k]
                new = substitute(tpl.fmt, binding)
                uses += 1
                outer = d.params if d is not None else None
                fmt, why = eval_format(new, macros, outer)
                if fmt is not None:
                    scan.call(tag, rel, t.line, tpl.level, fmt, lx.dead[i])
                elif outer is not None and why.startswith(("macro parameter", "stringified")) and depth < 6:
                    more.append(Template(tpl.level, d.macro, outer, new, rel, t.line))
                else:
                    scan.not_literal(tag, rel, t.line, tpl.level, new,
                                     f"{why} (through {tpl.macro})", lx.dead[i])
        raw = " ".join(a.text for a in tpl.fmt)
        if tpl.level == "WARN" or info_selected("".join(
                decode_c_string(a.text) for a in tpl.fmt if a.kind == "str")):
            scan.expanded[(tpl.level, tpl.path, tpl.macro, raw)].add(tag)
    if more:
        expand_templates(tag, lexed, macros, scan, more, depth + 1)


def git(mirror, *args, input_=None):
    return subprocess.run(["git", "-C", str(mirror), *args], input=input_, capture_output=True,
                          check=True).stdout


def read_blobs(mirror, tag, paths):
    """{path: text} for paths at tag, through one `git cat-file --batch`."""
    req = "".join(f"{tag}:{p}\n" for p in paths).encode()
    data = git(mirror, "cat-file", "--batch", input_=req)
    out = {}
    pos = 0
    for p in paths:
        nl = data.index(b"\n", pos)
        header = data[pos:nl].split()
        if header[-1] == b"missing":
            pos = nl + 1
            continue
        size = int(header[2])
        body = data[nl + 1:nl + 1 + size]
        out[p] = body.decode("utf-8", errors="replace")
        pos = nl + 1 + size + 1
    return out


def scan_tag(mirror, tag, scan: Scan):
    names = git(mirror, "ls-tree", "-r", "--name-only", tag, "--", "src").decode().splitlines()
    names = [n for n in names if Path(n).suffix in SOURCE_EXTS]
    texts = read_blobs(mirror, tag, names)
    lexed = {p: Lexed(text) for p, text in sorted(texts.items())}
    macros = Macros(lexed.values())
    templates = []
    for p, lx in lexed.items():
        if "WARN" in texts[p] or "INFO" in texts[p]:
            scan_file(tag, p, lx, macros, scan, templates)
    expand_templates(tag, lexed, macros, scan, templates)


# ---------------------------------------------------------------------------------------------
# Versions, families, merging


def version(tag: str) -> str:
    """v2.28.9-1 -> 2.28.9"""
    return tag[1:].rsplit("-", 1)[0]


def minor(tag: str) -> str:
    return ".".join(version(tag).split(".")[:2])


def releases_of(tags_present, all_tags):
    """'2.4-2.9, 2.12-2.28' from the tags (in all_tags order) that hold a format."""
    runs = []
    cur = None
    for t in all_tags:
        if t in tags_present:
            if cur is None:
                cur = [t, t]
            else:
                cur[1] = t
        elif cur is not None:
            runs.append(cur)
            cur = None
    if cur is not None:
        runs.append(cur)
    return ", ".join(minor(a) if a == b else f"{minor(a)}-{minor(b)}" for a, b in runs)


def default_family(fmt: str, path: str) -> str:
    for pat, fam in FAMILY_FORMAT_RULES:
        if pat.search(fmt) and fam is not None:
            return fam
    for pat, fam in FAMILY_RULES:
        if pat.search(path):
            return fam
    return "other"


def default_severity(fmt: str) -> str:
    return "note" if any(p.search(fmt) for p in NOTE_PATTERNS) else "error"


def tag_order(all_tags):
    return {t: i for i, t in enumerate(all_tags)}


def build_rows(found, all_tags, existing):
    order = tag_order(all_tags)
    rows = []
    for (level, fmt), sites in found.items():
        sites = sorted(sites, key=lambda s: (-order[s.tag], s.path, s.line))
        old = existing.get((level, fmt), {})
        row = {"level": level, "format": fmt}
        if "id" in old:
            row = {"id": old["id"], **row}
        row["family"] = old.get("family") or default_family(fmt, sites[0].path)
        row["severity"] = old.get("severity") or default_severity(fmt)
        row["releases"] = releases_of({s.tag for s in sites}, all_tags)
        row["sites"] = [f"{version(s.tag)} {s.path}:{s.line}" for s in sites]
        for k in ("meaning", "causes", "fix", "confirm"):
            if k in old:
                row[k] = old[k]
        row["_newest"] = max(order[s.tag] for s in sites)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# TOML out (tomllib reads; the standard library has no writer)


def toml_str(s: str) -> str:
    out = ['"']
    for c in s:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def toml_value(v, indent="") -> str:
    if isinstance(v, str):
        return toml_str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, list):
        if not v:
            return "[]"
        one = "[" + ", ".join(toml_value(x) for x in v) + "]"
        if len(one) <= 90:
            return one
        return "[\n" + "".join(f"{indent}  {toml_value(x)},\n" for x in v) + f"{indent}]"
    raise TypeError(type(v))


def write_toml(path: Path, families, rows, notes=None):
    out = [HEADER]
    if notes:
        out.append("#\n")
        out.extend(f"# {line}\n" if line else "#\n" for line in notes)
    for fam in families:
        out.append("\n[[family]]\n")
        for k in FAMILY_FIELDS:
            if k in fam:
                out.append(f"{k} = {toml_value(fam[k])}\n")
        for k, v in fam.items():
            if k not in FAMILY_FIELDS:
                out.append(f"{k} = {toml_value(v)}\n")
    for row in rows:
        out.append("\n[[msg]]\n")
        for k in ("id", "level", "format", "family", "severity", "releases", "sites",
                  "meaning", "causes", "fix", "confirm"):
            if k in row:
                out.append(f"{k} = {toml_value(row[k])}\n")
    text = "".join(out)
    tomllib.loads(text)  # never write a file we cannot read back
    path.write_text(text)


def list_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")


def write_list(path: Path, found, tag):
    lines = []
    for (level, fmt), sites in found.items():
        if level != "WARN":
            continue
        for s in sites:
            if s.tag == tag:
                lines.append((s.path, s.line, fmt))
    lines.sort()
    path.write_text("".join(f"{p}:{n}\t{list_escape(f)}\n" for p, n, f in lines))
    return len(lines)


# ---------------------------------------------------------------------------------------------


def main(argv=None):
    repo = Path(__file__).resolve().parents[2]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mirror", help="git directory of github.com/NVIDIA/nccl with its release tags")
    ap.add_argument("--toml", type=Path, default=repo / "src/nccl_log/warnings.toml")
    ap.add_argument("--list", type=Path, default=None,
                    help="site list of the newest tag (default src/nccl_log/warns-vX.Y.Z.txt)")
    ap.add_argument("--tags", nargs="*", default=TAGS, help="tags to scan, oldest first")
    args = ap.parse_args(argv)
    all_tags = args.tags
    newest = all_tags[-1]
    list_path = args.list or repo / f"src/nccl_log/warns-v{version(newest)}.txt"

    scan = Scan()
    for tag in all_tags:
        scan_tag(args.mirror, tag, scan)
    found, skipped, dead = scan.found, scan.skipped, scan.dead

    families = []
    existing = {}
    if args.toml.exists():
        doc = tomllib.loads(args.toml.read_text())
        families = doc.get("family", [])
        for m in doc.get("msg", []):
            existing[(m["level"], m["format"])] = m
    rows = build_rows(found, all_tags, existing)

    fam_ids = [f["id"] for f in families]
    for r in rows:
        if r["family"] not in fam_ids:
            fam_ids.append(r["family"])
            families.append({"id": r["family"], "title": r["family"],
                             "meaning": "TODO: what messages of this family mean.",
                             "causes": [], "fix": "TODO", "confirm": "TODO"})
            print(f"new family (fill it in): {r['family']}", file=sys.stderr)
    fam_rank = {f: i for i, f in enumerate(fam_ids)}
    rows.sort(key=lambda r: (fam_rank[r["family"]], LEVELS.index(r["level"]), -r["_newest"],
                             r["format"]))
    dropped = [m for k, m in existing.items() if k not in found]
    for m in dropped:
        print(f"dropped (format not found at any tag): {m.get('id', '')} {m['level']} "
              f"{m['format']!r}", file=sys.stderr)
    ids = [r["id"] for r in rows if "id" in r]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        sys.exit(f"duplicate ids: {sorted(dup)}")

    by_site = defaultdict(list)
    for s in skipped:
        by_site[(s.path, s.level, s.arg, s.why)].append(s.tag)
    by_dead = defaultdict(list)
    for s in dead:
        by_dead[(s.path, s.level, s.arg)].append(s)
    notes = ["Generated by the last run:", "",
             "Formats completed by a macro's argument, one site per use of the macro:"]
    for (level, path, macro, raw), tags in sorted(scan.expanded.items()):
        notes.append(f"  {level} {path} {macro} [{releases_of(tags, all_tags)}]: {raw}")
    notes.append("Calls whose format is not a literal (skipped):" + ("" if by_site else " none"))
    for (path, level, arg, why), tags in sorted(by_site.items()):
        notes.append(f"  {level} {path} [{releases_of(set(tags), all_tags)}] {why}: {arg}")
    notes.append("Calls inside #if 0 (never compiled, left out):" + ("" if by_dead else " none"))
    for (path, level, arg), ss in sorted(by_dead.items()):
        notes.append(f"  {level} {path}:{ss[-1].line} [{releases_of({x.tag for x in ss}, all_tags)}]: {arg!r}")

    args.toml.parent.mkdir(parents=True, exist_ok=True)
    write_toml(args.toml, families, rows, notes)
    n_list = write_list(list_path, found, newest)

    # summary
    print(f"scanned {len(all_tags)} tags ({all_tags[0]} .. {newest})")
    print(f"rows: {len(rows)} distinct (level, format): "
          f"{sum(r['level'] == 'WARN' for r in rows)} WARN, {sum(r['level'] == 'INFO' for r in rows)} INFO; "
          f"{len(ids)} with an id; {len(families)} families")
    print(f"{list_path.name}: {n_list} WARN sites")
    print("rows per family:")
    per = defaultdict(int)
    for r in rows:
        per[r["family"]] += 1
    for f in fam_ids:
        print(f"  {f:18} {per[f]}")
    new = [r for r in rows if (r["level"], r["format"]) not in existing]
    if existing and new:
        print(f"new rows (review family and severity): {len(new)}")
        for r in new:
            print(f"  {r['level']} {r['family']:16} {r['format']!r}")
    print(f"calls skipped, format not a literal: {len(skipped)} call sites over all tags, "
          f"{len(by_site)} distinct")
    for (path, level, arg, why), tags in sorted(by_site.items()):
        print(f"  {level} {path} [{releases_of(set(tags), all_tags)}] {why}: {arg}")
    print(f"formats built from a macro's arguments, expanded at each use of the macro "
          f"(site = the use): {len(scan.expanded)}")
    for (level, path, macro, raw), tags in sorted(scan.expanded.items()):
        print(f"  {level} {path} {macro} [{releases_of(tags, all_tags)}]: {raw}")
    print(f"calls inside #if 0 (never compiled, left out): {len(by_dead)} distinct")
    for (path, level, arg), ss in sorted(by_dead.items()):
        tags = {s.tag for s in ss}
        print(f"  {level} {path}:{ss[-1].line} [{releases_of(tags, all_tags)}]: {arg!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
