# SPDX-License-Identifier: LGPL-2.1-or-later
"""Scraping sandboxd's metrics endpoint and reading the Prometheus text format 0.0.4 strictly
(tests/t-metrics.sh).

    http(addr, raw_request, timeout) -> (status, headers, body)   addr: a path or (host, port)
    scrape(addr) -> Scrape   (raises ParseError on anything the format does not allow)

The parser refuses what a lenient one would pass: a sample before its family's HELP and TYPE, a
family's lines not together, a TYPE or HELP given twice, a name or label name outside the
format's alphabet, a bad escape in a label value, a value that is not a number, a series given
twice, a counter not ending in _total, histogram buckets that are not cumulative or whose +Inf
bucket differs from _count, and a body that does not end with a newline."""
import re
import socket

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class ParseError(Exception):
    pass


def connect(addr, timeout):
    if isinstance(addr, str):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(addr)
    return s


def read_all(s):
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            return out
        out += b


def http(addr, raw, timeout=10.0):
    """Sends raw (bytes) and reads until the daemon closes: (status, {header: value}, body)."""
    s = connect(addr, timeout)
    try:
        s.sendall(raw)
        data = read_all(s)
    finally:
        s.close()
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        raise ParseError("no end of headers in %r" % data[:200])
    lines = head.decode("ascii").split("\r\n")
    m = re.match(r"HTTP/1\.1 (\d{3}) [A-Za-z ]+\Z", lines[0])
    if not m:
        raise ParseError("bad status line %r" % lines[0])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(": ")
        headers[k.lower()] = v
    if not raw.startswith(b"HEAD ") and int(headers.get("content-length", -1)) != len(body):
        raise ParseError("Content-Length %s, body %d bytes" % (headers.get("content-length"), len(body)))
    return int(m.group(1)), headers, body


def get(addr, path="/metrics", method="GET", timeout=10.0):
    return http(addr, ("%s %s HTTP/1.1\r\nHost: sandboxd\r\nUser-Agent: t-metrics\r\n\r\n" % (method, path)).encode(), timeout)


def parse_labels(text, where):
    """{name: value} of 'a="x",b="y"' (the part between the braces)."""
    labels = {}
    i = 0
    while i < len(text):
        m = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"").match(text, i)
        if not m:
            raise ParseError("%s: bad label at %r" % (where, text[i:]))
        name = m.group(1)
        i = m.end()
        value = ""
        while True:
            if i >= len(text):
                raise ParseError("%s: unterminated label value" % where)
            c = text[i]
            if c == "\\":
                nxt = text[i + 1:i + 2]
                if nxt not in ("\\", '"', "n"):
                    raise ParseError("%s: bad escape \\%s" % (where, nxt))
                value += "\n" if nxt == "n" else nxt
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                raise ParseError("%s: newline in a label value" % where)
            else:
                value += c
                i += 1
        if name in labels:
            raise ParseError("%s: label %s twice" % (where, name))
        labels[name] = value
        if i < len(text):
            if text[i] != ",":
                raise ParseError("%s: expected ',' at %r" % (where, text[i:]))
            i += 1
    return labels


def family_of(name, types):
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[: -len(suffix)]
        if name.endswith(suffix) and types.get(base) in ("histogram", "summary"):
            return base
    return name


class Scrape:
    def __init__(self, text):
        self.types, self.helps, self.samples = {}, {}, {}
        self.parse(text)

    def parse(self, text):
        if not text.endswith("\n"):
            raise ParseError("the body does not end with a newline")
        done, current = set(), None
        for n, line in enumerate(text[:-1].split("\n"), 1):
            where = "line %d" % n
            if line.startswith("#"):
                parts = line.split(" ", 3)
                if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
                    continue  # a plain comment
                fam = parts[2]
                if not NAME.match(fam):
                    raise ParseError("%s: bad metric name %r" % (where, fam))
                if fam != current:
                    if fam in done:
                        raise ParseError("%s: family %s is not together" % (where, fam))
                    if current:
                        done.add(current)
                    current = fam
                table = self.helps if parts[1] == "HELP" else self.types
                if fam in table:
                    raise ParseError("%s: %s of %s twice" % (where, parts[1], fam))
                if fam in self.samples_of_family():
                    raise ParseError("%s: %s of %s after its samples" % (where, parts[1], fam))
                value = parts[3] if len(parts) > 3 else ""
                if parts[1] == "TYPE" and value not in TYPES:
                    raise ParseError("%s: bad type %r" % (where, value))
                table[fam] = value
                continue
            m = re.match(r"([^{ ]+)(?:\{(.*)\})? (\S+)\Z", line)
            if not m:
                raise ParseError("%s: not a sample: %r" % (where, line))
            name, labels, value = m.group(1), parse_labels(m.group(2) or "", where), m.group(3)
            if not NAME.match(name):
                raise ParseError("%s: bad metric name %r" % (where, name))
            fam = family_of(name, self.types)
            if fam != current:
                raise ParseError("%s: sample of %s outside its family's lines (HELP and TYPE first)" % (where, name))
            if fam not in self.helps or fam not in self.types:
                raise ParseError("%s: %s has no HELP or no TYPE" % (where, fam))
            try:
                v = float(value)
            except ValueError:
                raise ParseError("%s: value %r is not a number" % (where, value))
            key = (name, tuple(sorted(labels.items())))
            if key in self.samples:
                raise ParseError("%s: series %s given twice" % (where, key))
            self.samples[key] = v
        for fam, t in self.types.items():
            if t == "counter" and not fam.endswith("_total"):
                raise ParseError("counter %s does not end in _total" % fam)
            if t == "histogram":
                self.check_histogram(fam)

    def samples_of_family(self):
        return {family_of(k[0], self.types) for k in self.samples}

    def check_histogram(self, fam):
        buckets = sorted((float(dict(l)["le"]), v) for (n, l), v in self.samples.items() if n == fam + "_bucket")
        if not buckets or buckets[-1][0] != float("inf"):
            raise ParseError("histogram %s has no +Inf bucket" % fam)
        for (_, a), (_, b) in zip(buckets, buckets[1:]):
            if b < a:
                raise ParseError("histogram %s: buckets are not cumulative" % fam)
        if buckets[-1][1] != self.value(fam + "_count"):
            raise ParseError("histogram %s: +Inf bucket differs from _count" % fam)

    def value(self, name, **labels):
        return self.samples.get((name, tuple(sorted(labels.items()))))

    def label_values(self, name, label):
        return sorted(dict(l)[label] for (n, l), _ in self.samples.items() if n == name and label in dict(l))

    def counters(self):
        """Every sample of a counter family (and a histogram's, which only grow too)."""
        return {k: v for k, v in self.samples.items()
                if self.types.get(family_of(k[0], self.types)) in ("counter", "histogram")}


def scrape(addr, timeout=10.0):
    status, headers, body = get(addr, timeout=timeout)
    if status != 200:
        raise ParseError("status %d" % status)
    if headers.get("content-type") != "text/plain; version=0.0.4; charset=utf-8":
        raise ParseError("Content-Type %r" % headers.get("content-type"))
    return Scrape(body.decode("utf-8"))
