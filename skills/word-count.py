#!/usr/bin/env python3
# name: word-count
# description: Counts the words of a text and lists the most frequent ones / 统计词数和最常见的词
# param text: string, required — the text to count
# param top: integer = 5 — how many of the most frequent words to list
# returns: text
#
# A program skill (docs/memory-and-skills.md): it runs only after the person enables it
# (`aicard skill enable word-count`), under `--exec allowlist --allow skill:word-count` or
# `--exec on`. Its parameters arrive as one JSON object on stdin.
import collections
import json
import re
import sys

args = json.load(sys.stdin)
words = re.findall(r"\w+", args["text"].lower())
top = collections.Counter(words).most_common(max(0, args["top"]))
print(f"{len(words)} words")
for word, n in top:
    print(f"{word}: {n}")
