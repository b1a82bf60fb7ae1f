"""Figure of the T1/T2 transfer tables (:func:`fpirl.problems.transfer.transfer_table`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from ._common import _save

_LABELS = {"resolved": "re-solved reward", "behaviour_cloning": "behaviour cloning", "reward_q": "reward = Q",
           "uniform": "uniform"}


def plot_transfer(table: dict, path, title: str = "") -> Path:
    """Grouped bars per change of dynamics: mean policy KL to the expert's new optimum (left) and
    the true-reward value gap (right), one bar per candidate policy, log scale."""
    rows = table["rows"]
    cands = [k[3:] for k in rows[0] if k.startswith("kl_")]
    fig = Figure(figsize=(11, 4), layout="constrained")
    axes = fig.subplots(1, 2)
    x = np.arange(len(rows))
    width = 0.8 / len(cands)
    for ax, key, label in ((axes[0], "kl", "mean KL(expert's new optimum || policy)"),
                           (axes[1], "gap", "value gap J(expert) - J(policy)")):
        for k, c in enumerate(cands):
            vals = np.maximum([r[f"{key}_{c}"] for r in rows], 1e-12)
            ax.bar(x + (k - (len(cands) - 1) / 2) * width, vals, width, label=_LABELS.get(c, c))
        ax.set_yscale("log")
        ax.set_xticks(x, [r["change"] for r in rows], rotation=20, ha="right", fontsize=8)
        ax.set_ylabel(label)
        ax.grid(True, axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(cands), fontsize=8)
    if title:
        fig.suptitle(title, fontsize=9)
    return _save(fig, path)
