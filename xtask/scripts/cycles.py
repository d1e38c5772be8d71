#!/usr/bin/env python3
# Lists, per crate of the workspace, pairs of source files that import each
# other (following `crate::Name` re-exports of lib.rs/main.rs) and longer
# cycles. Usage: python3 xtask/scripts/cycles.py . [CRATE_DIR...]
# (prints nothing when clean; with no CRATE_DIR, crates/*/ and xtask/;
# `cargo xtask ci` passes every workspace member and judges the output).
"""Per crate: module -> modules it names via crate:: paths; report pairs that use each other and longer cycles."""
import re, sys, pathlib, itertools
root = pathlib.Path(sys.argv[1])
dirs = [pathlib.Path(a) for a in sys.argv[2:]]
srcs = [d/'src' for d in dirs if (d/'src').is_dir()] if dirs else sorted(root.glob('crates/*/src')) + sorted(root.glob('testing/*/src')) + [root/'xtask/src']
for src in srcs:
    mods = {}
    reexp = {}
    for top in ('lib.rs', 'main.rs'):
        t = src / top
        if not t.exists(): continue
        tt = t.read_text()
        for m in re.finditer(r'pub(?:\(crate\))? use ([a-z_][a-z0-9_]*)::(?:\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*))', tt):
            names = m.group(2).split(',') if m.group(2) else [m.group(3)]
            for n in names:
                n = n.strip().split(' as ')[-1].strip()
                if n: reexp[n] = m.group(1)
    for f in src.rglob('*.rs'):
        rel = f.relative_to(src).with_suffix('')
        parts = list(rel.parts)
        if parts[-1] == 'mod': parts = parts[:-1]
        if parts and parts[0] == 'bin': continue
        name = '::'.join(parts) or 'lib'
        if name in ('lib', 'main'): continue
        text = f.read_text()
        # strip cfg(test) modules roughly
        text = re.split(r'#\[cfg\(test\)\]\s*mod tests', text)[0]
        text = '\n'.join(l for l in text.split('\n') if not l.strip().startswith('//'))
        text = re.sub(r'//[^\n"]*$', '', text, flags=re.M)
        uses = set()
        for m in re.finditer(r'crate::([a-z_][a-z0-9_]*)(?:::([a-z_][a-z0-9_]*))?', text):
            a, b = m.group(1), m.group(2)
            uses.add(a)
            if b: uses.add(a + '::' + b)
        for m in re.finditer(r'crate::([A-Z][A-Za-z0-9_]*)', text):
            if m.group(1) in reexp: uses.add(reexp[m.group(1)])
        for m in re.finditer(r'crate::\{([^}]*(?:\{[^}]*\}[^}]*)*)\}', text):
            for item in re.split(r',\s*(?![^{]*\})', m.group(1)):
                seg = item.strip().split('::')[0].strip()
                if re.fullmatch(r'[a-z_][a-z0-9_]*', seg): uses.add(seg)
                elif seg in reexp: uses.add(reexp[seg])
        for m in re.finditer(r'(?:use |\s)super::([a-z_][a-z0-9_]*)', text):
            parent = '::'.join(name.split('::')[:-2] + [m.group(1)]) if '::' in name else m.group(1)
            uses.add(parent)
        mods[name] = uses
    names = set(mods)
    graph = {n: {u for u in us if u in names and u != n and not n.startswith(u + '::') and not u.startswith(n + '::')} for n, us in mods.items()}
    for a, b in itertools.combinations(sorted(graph), 2):
        if b in graph[a] and a in graph[b]:
            print(f'{src.parent.name}: {a} <-> {b}')
    # longer cycles via DFS
    state = {}; stack = []
    def dfs(n):
        state[n] = 1; stack.append(n)
        for m in graph[n]:
            if state.get(m) == 1:
                cyc = stack[stack.index(m):]
                if len(cyc) > 2: print(f'{src.parent.name}: cycle ' + ' -> '.join(cyc + [m]))
            elif m not in state: dfs(m)
        stack.pop(); state[n] = 2
    for n in sorted(graph):
        if n not in state: dfs(n)
