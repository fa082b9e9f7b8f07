#!/usr/bin/env python3
"""torch's label-smoothed cross-entropy for tests/train/label_smoothing_golden_test.cc.

  label_smoothing_reference.py IN OUT
IN: "N V eps" then N lines "target logit_0 ... logit_{V-1}" (target -100: ignored). OUT: the
mean loss of torch.nn.CrossEntropyLoss(label_smoothing=eps, ignore_index=-100) in float64 on the
first line, then its gradient with respect to the logits, one row per line.
Exit code 3 when torch is not importable (the C++ test then skips).
"""
import sys

try:
    import torch
except Exception as error:  # noqa: BLE001 - any import failure means "not available"
    print(f"torch not importable: {error}", file=sys.stderr)
    sys.exit(3)


def main():
    with open(sys.argv[1]) as f:
        n, v, eps = f.readline().split()
        rows = [line.split() for line in f if line.strip()]
    assert len(rows) == int(n) and all(len(row) == int(v) + 1 for row in rows)
    targets = torch.tensor([int(row[0]) for row in rows], dtype=torch.long)
    logits = torch.tensor([[float(x) for x in row[1:]] for row in rows], dtype=torch.float64,
                          requires_grad=True)
    loss = torch.nn.CrossEntropyLoss(label_smoothing=float(eps), ignore_index=-100)(logits, targets)
    loss.backward()
    with open(sys.argv[2], "w") as out:
        out.write(f"{loss.item():.17g}\n")
        for row in logits.grad.tolist():
            out.write(" ".join(f"{x:.17g}" for x in row) + "\n")


if __name__ == "__main__":
    main()
