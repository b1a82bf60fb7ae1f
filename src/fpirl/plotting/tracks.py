"""Figure of observed against simulated track statistics (``fpirl compare TRACKS SIM.csv``).

Four panels: mean-squared displacement (log-log), velocity autocorrelation, speed and turning-angle
distributions; each curve with its bootstrap band over tracks and the panel's numbers in the title.
The numbers come from :func:`fpirl.evaluation.track_stats.compare_tracks`; nothing is computed here.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from .fields import save_figure
from matplotlib.ticker import NullFormatter

__all__ = ["plot_track_comparison"]

_PANELS = (
    ("msd", "mean-squared displacement", "lag", "MSD"),
    ("vacf", "velocity autocorrelation", "lag", "VACF (normalised)"),
    ("speed", "speed distribution", "speed", "density"),
    ("turning_angle", "turning-angle distribution", "turning angle [rad]", "density"),
)


def plot_track_comparison(summary: dict, observed, simulated, path, labels=("observed", "simulated"),
                          units: tuple[str, str] | None = None, title: str | None = None) -> Path:
    """Draw MSD, VACF, speed and turning-angle panels of two :class:`~fpirl.evaluation.track_stats.TrackStatistics`.

    ``summary`` is the first return value of :func:`~fpirl.evaluation.track_stats.compare_tracks`;
    ``units`` = (position unit, time unit) for the axis labels.
    """
    fig = Figure(figsize=(11, 8), layout="constrained")
    axes = fig.subplots(2, 2).ravel()
    pu, tu = units if units else ("", "")
    for ax, (name, heading, xlabel, ylabel) in zip(axes, _PANELS):
        for stats, label, colour in ((observed, labels[0], "k"), (simulated, labels[1], "tab:red")):
            x, v, lo, hi = stats.curves[name]
            ax.fill_between(x, lo, hi, color=colour, alpha=0.2, linewidth=0)
            ax.plot(x, v, color=colour, label=f"{label} ({stats.n_tracks} tracks)")
        s = summary[name]
        extra = f", KS {s['ks']:.2f}" if "ks" in s else ""
        ax.set_title(f"{heading}\ninside band {100 * s['inside_band']:.0f}%, discrepancy {s['discrepancy']:.2f}"
                     f"{extra}", fontsize=10)
        if name == "msd":

            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ylabel = f"MSD [{pu}$^2$]" if pu else ylabel
        if name in ("msd", "vacf") and tu:
            xlabel = f"lag [{tu}]"
        if name == "speed" and pu and tu:
            xlabel = f"speed [{pu}/{tu}]"
        if name == "vacf":
            ax.axhline(0.0, color="0.6", linewidth=0.8)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    fig.suptitle(title or "observed vs simulated tracks (bands: 95% over tracks resampled with replacement; "
                 "discrepancy: mean |sim - obs| / band half-width)", fontsize=10)
    return save_figure(fig, path)
