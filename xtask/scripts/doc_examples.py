#!/usr/bin/env python3
"""Lists the public functions of the library crates whose doc comment has no example.

Usage: doc_examples.py [--summary] [CRATE_DIR ...]   (default: the library crates)
       doc_examples.py --self-test                   (checks the checker on a fixture)

A public function is one a user of the crate can call:
- a `pub fn` at the top level of a public module, or of a private module
  whose function is re-exported by name (`pub use`);
- a `pub fn` in an inherent `impl` of a type that is public (defined `pub`
  in a public module, or re-exported by name);
- every `fn` of a `pub trait` that is public the same way.
`pub(crate)`/`pub(super)`/`pub(in ..)` items, `#[cfg(test)]` modules and
items, `#[doc(hidden)]` modules (a crate's doctest fixtures, `doc_support`:
not part of its API, ADR 0101) and function bodies are skipped. An example is a fenced code block
(a doc line starting with ```). Prints `path:line: item` for each function
without one and exits 1 if there is any; exits 0 otherwise.

Pragmatic, not a Rust parser: names are matched without paths, so a private
type sharing a re-exported name counts as public; a `pub use m::*` makes
every pub item of a module file named `m` public; inline modules count as
public if declared `pub`, items of private inline modules are skipped.
Standard library only.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Paths from the root: the published libraries under crates/, the test kit
# the backends' authors use under testing/ (ADR 0055).
LIBRARY_CRATES = [
    "election-core",
    "election-driver",
    "election-file",
    "election-sql",
    "election-sqlite",
    "election-nats",
    "election-postgres",
    "election-etcd",
    "election-url",
    "fencing",
]
LIBRARY_DIRS = [f"crates/{c}" for c in LIBRARY_CRATES] + ["testing/election-testkit"]

FN_RE = re.compile(
    r'^(?P<vis>pub(?:\s*\([^)]*\))?\s+)?(?:default\s+)?(?:const\s+)?(?:async\s+)?'
    r'(?:unsafe\s+)?(?:extern\s+"[^"]*"\s+)?fn\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)'
)
MOD_RE = re.compile(r'^(?P<vis>pub(?:\s*\([^)]*\))?\s+)?mod\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)$')
TYPE_RE = re.compile(
    r'^(?P<vis>pub(?:\s*\([^)]*\))?\s+)?(?:unsafe\s+)?(?:auto\s+)?'
    r'(?P<kind>struct|enum|trait|union|type)\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)'
)
ATTR_RE = re.compile(r'#!?\[')


def strip_attrs(header):
    """Returns (attributes, rest) of an item header: leading `#[...]`s split off."""
    attrs = []
    s = header.strip()
    while True:
        m = ATTR_RE.match(s)
        if not m:
            return attrs, s
        depth = 0
        for i in range(m.end() - 1, len(s)):
            if s[i] == '[':
                depth += 1
            elif s[i] == ']':
                depth -= 1
                if depth == 0:
                    attrs.append(s[: i + 1])
                    s = s[i + 1 :].strip()
                    break
        else:
            return attrs, s


def is_cfg_test(attrs):
    return any(re.match(r'#\[\s*cfg\s*\(\s*test\s*\)\s*\]', a) for a in attrs)


def is_doc_hidden(attrs):
    return any(re.match(r'#\[\s*doc\s*\(\s*hidden\s*\)\s*\]', a) for a in attrs)


def is_public(vis):
    return vis is not None and vis.strip() == 'pub'


def lex(text):
    """Yields (line_no, kind, value): kind is 'doc' (an outer doc line's
    text), 'code' (a run of code, strings blanked) or a delimiter
    '{', '}', ';'."""
    i, n, line = 0, len(text), 1
    code = []

    def flush():
        if code:
            s = ''.join(code)
            code.clear()
            if s.strip():
                return [(line, 'code', s)]
        return []

    while i < n:
        c = text[i]
        if c == '\n':
            line += 1
            code.append(' ')
            i += 1
        elif text.startswith('///', i) and not text.startswith('////', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            yield from flush()
            yield (line, 'doc', text[i + 3 : j])
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif text.startswith('/**', i) and not text.startswith('/**/', i):
            j = text.find('*/', i + 3)
            j = n if j < 0 else j
            yield from flush()
            for k, doc_line in enumerate(text[i + 3 : j].split('\n')):
                yield (line + k, 'doc', doc_line.lstrip().lstrip('*'))
            line += text.count('\n', i, j)
            i = j + 2
        elif text.startswith('/*', i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith('/*', j):
                    depth, j = depth + 1, j + 2
                elif text.startswith('*/', j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            line += text.count('\n', i, j)
            code.append(' ')
            i = j
        elif c == 'r' and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            line += text.count('\n', i, j)
            code.append('""')
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == '\\' else 1
            line += text.count('\n', i, j)
            code.append('""')
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '{') or a lifetime ('a).
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:
                code.append("' '")
                i += m.end()
            else:
                code.append(c)
                i += 1
        elif c in '{};':
            yield from flush()
            yield (line, c, c)
            i += 1
        else:
            code.append(c)
            i += 1
    yield from flush()


def impl_self_type(rest):
    """The type name an `impl` header is for, or None for a trait impl."""
    s = rest[len('impl'):].strip()
    if s.startswith('<'):
        depth = 0
        for i, ch in enumerate(s):
            depth += ch == '<'
            depth -= ch == '>'
            if depth == 0:
                s = s[i + 1 :].strip()
                break
    s = re.split(r'\bwhere\b', s)[0]
    # Top-level ` for ` (outside generics) marks a trait impl.
    depth = 0
    flat = []
    for ch in s:
        if ch == '<':
            depth += 1
        elif ch == '>':
            depth -= 1
        elif depth == 0:
            flat.append(ch)
    flat = ''.join(flat)
    if re.search(r'\bfor\b', flat):
        return None
    names = re.findall(r'[A-Za-z_][A-Za-z0-9_]*', flat)
    return names[-1] if names else None


def scan_items(text):
    """Yields every item of one file: (kind, name, vis, line, docs, context),
    where context is the enclosing scope ('module', ('impl', Type),
    ('trait', Trait, public)) and kind is 'fn', 'mod', 'type' or 'use'."""
    stack = []  # scopes: 'module', ('impl', T), ('trait', T), 'skip'
    header, header_line, docs = [], None, []

    def scope():
        return stack[-1] if stack else 'module'

    for line, kind, value in lex(text):
        if kind == 'doc':
            docs.append(value)
            continue
        if kind == 'code':
            if header_line is None:
                header_line = line
            header.append(value)
            continue
        raw = ' '.join(' '.join(header).split())
        attrs, rest = strip_attrs(raw)
        if kind in '{}' and re.match(r'^(pub(\s*\([^)]*\))?\s+)?use\b', rest):
            header.append(kind)  # a `use` list: part of the statement
            continue
        cur = scope()
        item_line = header_line
        header, header_line, item_docs, docs = [], None, docs, []
        if kind == '}':
            if stack:
                stack.pop()
            continue
        skipping = cur == 'skip' or is_cfg_test(attrs)
        if not skipping and cur != 'body':
            m = FN_RE.match(rest)
            if m:
                yield ('fn', m.group('name'), m.group('vis'), item_line, item_docs, cur)
            elif kind == ';' and (m := MOD_RE.match(rest)):
                vis = None if is_doc_hidden(attrs) else m.group('vis')
                yield ('mod', m.group('name'), vis, item_line, item_docs, cur)
            elif (m := TYPE_RE.match(rest)):
                yield ('type', m.group('name'), m.group('vis'), item_line, item_docs, cur)
            elif re.match(r'^pub\s+use\b', rest):
                yield ('use', rest, 'pub', item_line, item_docs, cur)
        if kind != '{':
            continue
        if skipping:
            stack.append('skip')
        elif cur == 'body':
            stack.append('body')
        elif rest.startswith('impl') and re.match(r'^impl\b', rest):
            t = impl_self_type(rest)
            stack.append(('impl', t) if t else 'body')
        elif (m := TYPE_RE.match(rest)) and m.group('kind') == 'trait':
            stack.append(('trait', m.group('name'), is_public(m.group('vis'))))
        elif (m := re.match(r'^(?P<vis>pub(?:\s*\([^)]*\))?\s+)?mod\s+(?P<name>\w+)$', rest)):
            # An inline module: pragmatically, as public as its file.
            public = is_public(m.group('vis')) and not is_doc_hidden(attrs)
            stack.append('module' if public else 'skip')
        else:
            stack.append('body')  # fn bodies, struct/enum bodies, macros


def rs_files(src):
    """Maps each file of the crate's module tree to (public, test): public
    when every `mod` on the way from lib.rs is `pub`."""
    out = {}

    def visit(path, public, mod_dir):
        if path in out or not path.exists():
            return
        out[path] = public
        for kind, name, vis, _, _, cur in scan_items(path.read_text()):
            if kind != 'mod' or cur != 'module':
                continue
            for cand in (mod_dir / f'{name}.rs', mod_dir / name / 'mod.rs'):
                if cand.exists():
                    sub_dir = cand.parent if cand.name == 'mod.rs' else mod_dir / name
                    visit(cand, public and is_public(vis), sub_dir)
                    break

    lib = src / 'lib.rs'
    visit(lib, True, src)
    return out


def exported_names(files):
    """Every name listed in a `pub use` of the crate, and the modules
    re-exported whole (`pub use module::*`)."""
    names, globbed = set(), set()
    for path in files:
        for kind, rest, _, _, _, _ in scan_items(path.read_text()):
            if kind == 'use':
                for name in re.findall(r'[A-Za-z_][A-Za-z0-9_]*', rest):
                    names.add(name)
                for module in re.findall(r'([A-Za-z_][A-Za-z0-9_]*)\s*::\s*\*', rest):
                    globbed.add(module)
    return names, globbed


def module_name(path):
    return path.parent.name if path.name == 'mod.rs' else path.stem


def has_example(docs):
    return any(d.strip().startswith('```') for d in docs)


def check_crate(crate_dir):
    """Returns (total, missing): the public fns and those without an example."""
    src = crate_dir / 'src'
    files = rs_files(src)
    exported, globbed = exported_names(files)
    files = {p: public or module_name(p) in globbed for p, public in files.items()}
    public_types = set()
    for path, public in files.items():
        for kind, name, vis, _, _, cur in scan_items(path.read_text()):
            if kind == 'type' and cur == 'module' and is_public(vis) and (public or name in exported):
                public_types.add(name)
    total, missing = [], []
    for path, public in sorted(files.items()):
        for kind, name, vis, line, docs, cur in scan_items(path.read_text()):
            if kind != 'fn':
                continue
            if cur == 'module':
                reachable = is_public(vis) and (public or name in exported)
                label = name
            elif cur[0] == 'impl':
                reachable = is_public(vis) and cur[1] in public_types
                label = f'{cur[1]}::{name}'
            elif cur[0] == 'trait':
                reachable = cur[2] and cur[1] in public_types
                label = f'{cur[1]}::{name}'
            else:
                reachable = False
            if not reachable:
                continue
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            where = f'{shown}:{line}: {label}'
            total.append(where)
            if not has_example(docs):
                missing.append(where)
    return total, missing


SELF_TEST_FILES = {
    'lib.rs': """//! A crate.
mod private;
pub mod open;
mod inner;
#[cfg(test)]
mod test_support;
#[doc(hidden)]
pub mod doc_support;
pub use private::{Exported, exported_fn};
pub use inner::deep::*;

/// Has one.
///
/// ```
/// with_example();
/// ```
pub fn with_example() {}

/// None here, and braces in literals: "{", '{', r#"}"#.
pub fn without_example() {
    let _ = ("{ not a brace", '{', r#"}}}"#, '\\'');
}

pub(crate) fn crate_only() {}

#[cfg(test)]
mod tests {
    pub fn in_tests() {}
}
""",
    'private.rs': """/// A type.
pub struct Exported;
pub struct Hidden;
impl Exported {
    /// No example.
    pub fn method(&self) {}
    fn private_method(&self) {}
    pub(crate) fn crate_method(&self) {}
}
impl Hidden {
    pub fn hidden_method(&self) {}
}
impl<T: Clone> From<T> for Exported {
    fn from(_: T) -> Exported { Exported }
}
/// Doc.
pub fn exported_fn<'a>(x: &'a str) -> &'a str { x }
pub fn not_exported() {}
pub trait Secret { fn s(&self); }
""",
    'open.rs': """/// A public trait.
pub trait Step {
    /// Doc.
    fn run(&self);
    /// Has one.
    /// ```
    /// ```
    fn done(&self) -> bool { true }
}
pub fn open_fn() {}
pub mod nested {
    pub fn nested_fn() {}
}
""",
    'inner/mod.rs': "pub mod deep;\n",
    'inner/deep.rs': "pub struct Deep;\nimpl Deep { pub async fn go(&self) {} }\npub fn globbed() {}\n",
    'test_support.rs': "pub fn support() {}\n",
    'doc_support.rs': "pub fn fixture() {}\n#[doc(hidden)]\npub mod inline { pub fn f() {} }\n",
}

SELF_TEST_EXPECTED = [
    'inner/deep.rs:2: Deep::go',
    'inner/deep.rs:3: globbed',
    'lib.rs:20: without_example',
    'open.rs:4: Step::run',
    'open.rs:10: open_fn',
    'open.rs:12: nested_fn',
    'private.rs:6: Exported::method',
    'private.rs:17: exported_fn',
]


def self_test():
    """Checks the checker on a fixture crate: exactly the public fns
    without an example are listed."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / 'fixture' / 'src'
        for name, text in SELF_TEST_FILES.items():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_text(text)
        total, missing = check_crate(src.parent)
        got = [m.split('/src/', 1)[1] for m in missing]
    if got != SELF_TEST_EXPECTED or len(total) != 10:
        print(f'self-test failed: {len(total)} public fns (expected 10), listed:', file=sys.stderr)
        for g in got:
            print(f'  {g}', file=sys.stderr)
        return 1
    print('self-test passed')
    return 0


def main(argv):
    if argv == ['--self-test']:
        return self_test()
    summary = '--summary' in argv
    args = [a for a in argv if a != '--summary']
    dirs = [pathlib.Path(a).resolve() for a in args] or [ROOT / d for d in LIBRARY_DIRS]
    any_missing = False
    for d in dirs:
        total, missing = check_crate(d)
        for m in missing:
            print(m)
        if summary:
            print(f'{d.name}: {len(total) - len(missing)} of {len(total)} public fns have an example')
        any_missing |= bool(missing)
    sys.stdout.flush()
    if any_missing:
        print('public fns above have no example in their doc comment (a ``` block)', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
