#!/usr/bin/env python3
"""Lines of code of a crate's src/: no blank lines, no comment/doc lines, no #[cfg(test)] items."""
import sys, pathlib
def count(text):
    lines = text.split('\n'); n = 0; i = 0
    while i < len(lines):
        s = lines[i].strip()
        if s.startswith('#[cfg(test)]'):
            # skip the next item: until braces balance
            depth = 0; started = False; i += 1
            while i < len(lines):
                t = lines[i]
                depth += t.count('{') - t.count('}')
                if '{' in t: started = True
                i += 1
                if started and depth <= 0: break
                if not started and t.strip().endswith(';'): break
            continue
        if s and not s.startswith('//'):
            n += 1
        i += 1
    return n
total = 0
for d in sys.argv[1:]:
    for p in sorted(pathlib.Path(d).rglob('*.rs')):
        c = count(p.read_text()); total += c
        print(f'{c:6} {p}')
print(f'{total:6} total')
