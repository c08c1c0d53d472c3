"""Small V4.1-shaped tables for examples, benchmarks and tests.

``scale_layout`` keeps a hash layout's orders, heads and multipliers (so the
same n-gram structure and reuse pattern) and replaces each layer's primes by
consecutive primes above ``target_rows / rows_per_token``, as the C++ tools'
ScaleLayout does. ``write_generated_tables`` writes one engram-gen table per
layer with that layout embedded, so ``Store.stage`` can hash for it.
"""

import json
import os
import subprocess


def _is_prime(n):
    if n < 2:
        return False
    f = 2
    while f * f <= n:
        if n % f == 0:
            return False
        f += 1
    return True


def scale_layout(layout_path, target_rows):
    """The layout file's document with every layer scaled to about target_rows rows."""
    with open(layout_path) as f:
        layout = json.load(f)
    for layer in layout["layers"]:
        heads = layer["heads"]
        p = target_rows // (len(layer["orders"]) * heads)
        primes, offsets, total = [], [], 0
        for _ in layer["orders"]:
            row_p, row_o = [], []
            for _ in range(heads):
                p += 1
                while not _is_prime(p):
                    p += 1
                row_p.append(p)
                row_o.append(total)
                total += p
            primes.append(row_p)
            offsets.append(row_o)
        layer["primes"], layer["offsets"], layer["total_rows"] = primes, offsets, total
    return layout


def write_generated_tables(engram_gen, layout_path, out_dir, target_rows, layers=(0, 1), seeds=(11, 12),
                           record_bytes=264):
    """Writes out_dir/layer<layer_id>.engram per layer index (the scaled layout
    embedded) and out_dir/layout-scaled.json; returns (table paths, layout
    path). A table already there is kept: use one out_dir per set of arguments."""
    os.makedirs(out_dir, exist_ok=True)
    layout = scale_layout(layout_path, target_rows)
    scaled_path = os.path.join(out_dir, "layout-scaled.json")
    with open(scaled_path, "w") as f:
        json.dump(layout, f)
    paths = []
    for index, seed in zip(layers, seeds):
        layer_id = layout["layers"][index]["layer_id"]
        path = os.path.join(out_dir, f"layer{layer_id}.engram")
        if not os.path.exists(path):
            subprocess.run([engram_gen, "--layout", scaled_path, "--layer", str(layer_id), "--seed", str(seed),
                            "--record-bytes", str(record_bytes), path], check=True)
        paths.append(path)
    return paths, scaled_path
