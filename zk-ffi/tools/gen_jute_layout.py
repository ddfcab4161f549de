#!/usr/bin/env python3
"""Writes a C program printing sizeof and every offsetof of the structs in a zookeeper.jute.h, so
the same program built against Apache's header and ours can be compared (tests/abi.rs)."""
import re
import sys

text = open(sys.argv[1]).read()
print("#include <zookeeper/zookeeper.h>\n#include <stddef.h>\n#include <stdio.h>\nint main(void) {")
for m in re.finditer(r"struct (\w+) \{(.*?)\};", text, re.S):
    name = m.group(1)
    print('    printf("%s %%zu\\n", sizeof(struct %s));' % (name, name))
    for f in re.findall(r"(\w+);", m.group(2)):
        print('    printf("%s.%s %%zu\\n", offsetof(struct %s, %s));' % (name, f, name, f))
print("    return 0;\n}")
