import sys, runpy
from babel.messages.pofile import read_po, write_po
Z = {}
plural = {}
for f in sys.argv[2:]:
    g = runpy.run_path(f); Z.update(g['Z']); plural.update(g.get('PLURAL', {}))
p = sys.argv[1]
with open(p, 'rb') as fh:
    cat = read_po(fh, locale='zh_CN')
missing = []
for m in cat:
    if not m.id: continue
    if isinstance(m.id, tuple):
        if m.id[0] in plural: m.string = tuple(plural[m.id[0]])
        elif not any(m.string): missing.append(m.id)
    elif m.id in Z: m.string = Z[m.id]
    elif not m.string: missing.append(m.id)
with open(p, 'wb') as fh:
    write_po(fh, cat, width=76, no_location=True, ignore_obsolete=True)
print("missing:", missing)
