#!/usr/bin/env python3
"""A fixed test corpus: LINES lines of 4-11 words from a small word list, drawn by an LCG, so that
what a test or benchmark measures on it stays put from run to run.

    python3 scripts/lcg_corpus.py LINES OUTPUT
"""
import sys

WORDS = ("the king queen speaks of a night sword crown and dark sea fair lord my heart doth love "
         "thee to battle wind star gold is not where home").split()


def main():
    if len(sys.argv) != 3 or not sys.argv[1].isdigit():
        sys.exit("usage: lcg_corpus.py LINES OUTPUT")
    state = 12345

    def draw():
        nonlocal state
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        return state >> 33

    with open(sys.argv[2], "w") as out:
        for _ in range(int(sys.argv[1])):
            out.write(" ".join(WORDS[draw() % len(WORDS)] for _ in range(4 + draw() % 8)) + ".\n")


if __name__ == "__main__":
    main()
