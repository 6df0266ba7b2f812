#!/usr/bin/env python3
"""The code's shape, for before/after figures: lines per target (by file kind), Swift files over
300 lines, and functions over 80 lines (counted from `func`/`init` to the matching brace).

  python3 scripts/code_shape.py DIR      DIR holds Sources/ (e.g. `git archive REV Sources | tar -x -C DIR`)
"""
import collections
import os
import re
import sys
root=sys.argv[1]
def strip(line):
    return re.sub(r'"(?:\\.|[^"\\])*"','""',line).split('//')[0]
per_target=collections.Counter(); big_files=[]; long_funcs=[]
for dirpath,_,files in os.walk(os.path.join(root,'Sources')):
    for f in files:
        p=os.path.join(dirpath,f)
        rel=os.path.relpath(p,root)
        target=rel.split('/')[1]
        lines=open(p,errors='replace').read().split('\n')
        n=len(lines)-1 if lines and lines[-1]=='' else len(lines)
        per_target[(target, 'swift' if f.endswith('.swift') else os.path.splitext(f)[1] or f)]+=n
        if not f.endswith('.swift'): continue
        if n>300: big_files.append((n,rel))
        # functions: a line with func/init declaration; count to matching brace
        i=0
        in_ml=False
        while i<len(lines):
            l=lines[i]
            if re.search(r'^\s*(public |private |fileprivate |internal |static |@\w+ |override |mutating |nonisolated |final |class )*(func |init[?!]?[(<]|subscript)',l):
                depth=0; started=False; j=i
                while j<len(lines):
                    s=strip(lines[j])
                    if '"""' in lines[j]:
                        # skip multi-line string
                        k=j+1
                        if lines[j].count('"""')==1:
                            while k<len(lines) and '"""' not in lines[k]: k+=1
                            j=k+1 if False else k
                            s=''
                    depth+=s.count('{')-s.count('}')
                    if '{' in s: started=True
                    if started and depth<=0: break
                    j+=1
                length=j-i+1
                if length>80: long_funcs.append((length,rel,i+1,l.strip()[:70]))
                i+=1
                continue
            i+=1
tot=collections.Counter()
for (t,k),n in per_target.items(): tot[t]+=n
for t in sorted(tot): print(f"{t:24} {tot[t]:6}  " + ", ".join(f"{k}:{n}" for (tt,k),n in sorted(per_target.items()) if tt==t))
print("files over 300 lines:",len(big_files))
print("functions over 80 lines:",len(long_funcs))
for x in sorted(long_funcs,reverse=True): print("  ",x)
