#!/usr/bin/env python3
"""A session file changed after import, under a running `serve`: grown, edited in place at
the same size, replaced by a new inode with the same bytes, truncated, put back; and a
session file that is a hard link to a file outside the workspace. Prints each answer's
start; every changed state must be refused ("changed since it was imported") and a new
`import` must bring reads back.

Usage: tools/.venv/bin/python tools/attack/session_changes.py [--bin PATH]
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Raw, arguments, cli, indexes, make_workspace, parse  # noqa: E402

parser = arguments(None, "evidence-store-changes")
args = parse(parser)
B = args.bin.resolve()
W = args.work
ws=make_workspace(W / 'ws',2,projects=1,sessions=1,turns=6,tool_output_max="8K")
cli(B,ws,"import")
p,rows=next(iter(indexes(ws).items())); row=rows[0]
path=ws/"projects"/p/row["session_path"]
orig=path.read_bytes()
raw=Raw(B,ws); raw.initialize()
def rd():
    g=raw.tool("read_session_lines",{"project_key":p,"session_ref":row["session_ref"],"start_line":1,"end_line":2,"mode":"full"})
    return (g[1][:160].replace("\n"," ") if g else None)
print("before:", rd())
with open(path,"ab") as f: f.write(b'{"x":1}\n')
print("grown:", rd())
path.write_bytes(orig)
b=bytearray(orig); i=b.index(b'"'); b[i+1]=ord('Z') if b[i+1]!=ord('Z') else ord('Y'); path.write_bytes(bytes(b))
print("same size, in place:", rd())
tmp=path.with_name("x.tmp"); tmp.write_bytes(orig); os.rename(tmp,path)
print("same bytes, new inode:", rd())
path.write_bytes(orig[:len(orig)//2])
print("truncated:", rd())
path.write_bytes(orig)
print("restored (same inode as new file):", rd())
raw.close()
d=cli(B,ws,"import"); print("import", d.returncode)
raw=Raw(B,ws); raw.initialize(); print("after import:", rd()); raw.close()

# A hard link to a file outside the workspace (not a path: nothing on the way leaves it).
ws2 = make_workspace(W / "hl", 2, projects=1, sessions=1, turns=4, tool_output_max="4K")
p2, rows2 = next(iter(indexes(ws2).items()))
path2 = ws2 / "projects" / p2 / rows2[0]["session_path"]
outside = W / "outside.jsonl"
outside.unlink(missing_ok=True)
outside.write_bytes(path2.read_bytes())
path2.unlink()
os.link(outside, path2)
done = cli(B, ws2, "import")
raw = Raw(B, ws2)
raw.initialize()
g = raw.tool("read_session_lines", {"project_key": p2, "session_ref": rows2[0]["session_ref"], "start_line": 1,
                                    "end_line": 1, "mode": "full"})
raw.close()
print("hard link to an outside file: import", done.returncode, "read:", g[1][:60].replace("\n", " ") if g else None)
