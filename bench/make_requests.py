#!/usr/bin/env python3
"""Cuts the report's five requests out of a token file.

    make_requests.py TOKENS.u32 OUT_DIR A_BEGIN A_END B_BEGIN B_END

TOKENS.u32 holds little-endian uint32 token IDs. Writes OUT_DIR/req1..req5.u32:
A = tokens [A_BEGIN, A_END), A' (A with its first 16 tokens replaced by seeded
pseudo-random IDs), B = [B_BEGIN, B_END), B' and A'' likewise, as
tests/fixtures/traces/README describes the shared requests. The seeds are
fixed, so the same arguments always give the same files.
"""
import array
import os
import random
import sys


def restart(tokens, seed):
    rng = random.Random(seed)
    out = list(tokens)
    for i in range(16):
        out[i] = rng.randrange(3, 128000)
    return out


def main(argv):
    if len(argv) != 7:
        sys.exit(__doc__)
    tokens_path, out_dir = argv[1], argv[2]
    try:
        a0, a1, b0, b1 = (int(x) for x in argv[3:7])
    except ValueError:
        sys.exit(f'token offsets must be integers, got {" ".join(argv[3:7])}')
    tokens = array.array('I')
    try:
        with open(tokens_path, 'rb') as f:
            data = f.read()
    except OSError as e:
        sys.exit(f'{tokens_path}: {e.strerror}')
    if len(data) % 4:
        sys.exit(f'{tokens_path}: {len(data)} bytes is not a whole number of uint32 tokens')
    tokens.frombytes(data)
    need = max(a1, b1)
    if not (0 <= a0 < a1 and 0 <= b0 < b1) or len(tokens) < need:
        sys.exit(f'{tokens_path}: {len(tokens)} tokens; A = [{a0}, {a1}), B = [{b0}, {b1}) do not fit')
    a, b = list(tokens[a0:a1]), list(tokens[b0:b1])
    os.makedirs(out_dir, exist_ok=True)
    for name, toks in [('req1', a), ('req2', restart(a, 0x5eed1002)), ('req3', b),
                       ('req4', restart(b, 0x5eed1004)), ('req5', restart(a, 0x5eed1005))]:
        with open(os.path.join(out_dir, name + '.u32'), 'wb') as f:
            f.write(array.array('I', toks).tobytes())


if __name__ == '__main__':
    main(sys.argv)
