"""The report over run directories of one kind: ``metrics.json`` and ``report.md``, a row per
method and a section per dataset (images also get the IoU histogram and the gallery)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from sam3_agent.runs.evaluation.catalog import VIDEO_DATASETS, dataset_title
from sam3_agent.runs.evaluation.coverage import partial_text
from sam3_agent.runs.evaluation.differences import sample_differences
from sam3_agent.runs.evaluation.figures import (
    GALLERY_DIR,
    HISTOGRAM,
    GalleryItem,
    write_gallery,
    write_histogram,
)
from sam3_agent.runs.evaluation.methods import (
    VIDEO,
    Method,
    VideoMethod,
    load_methods,
    ordered_splits,
    runs_kind,
)
from sam3_agent.runs.evaluation.metrics import PR_THRESHOLDS
from sam3_agent.runs.evaluation.published import for_dataset, matches
from sam3_agent.runs.evaluation.report_parts import (
    RUN_HEADER,
    Compared,
    ReportFiles,
    cell,
    comparison_line,
    comparison_table,
    difference_lines,
    difference_summary,
    failed_lines,
    make_report_dir,
    pct,
    run_cells,
    table,
    write_markdown,
    write_metrics,
)
from sam3_agent.runs.evaluation.video.metrics import VideoSummary

logger = logging.getLogger(__name__)


IMAGE_INTRO = (
    "IoU per sample on the union of predicted masks (ignore pixels excluded; 1.0 when "
    "prediction and target are both empty); gIoU = mean IoU, cIoU = ΣI / ΣU. "
    "Failed samples count as empty predictions."
)


def report_runs(run_dirs: Sequence[Path], out_dir: Path, *, gallery_size: int = 6) -> ReportFiles:
    """Write the report of ``run_dirs`` (image or video runs, not both) to ``out_dir``."""
    kind = runs_kind(run_dirs)
    methods = load_methods(run_dirs, kind)
    make_report_dir(out_dir)
    comparisons = compare_with_published(methods, video=kind == VIDEO)
    warning = video_warning(comparisons) if kind == VIDEO else partial_warning(methods)
    differences = sample_differences(methods)
    metrics_path = write_metrics(
        out_dir,
        published=[r for d in dict.fromkeys(m.dataset for m in methods) for r in for_dataset(d)],
        comparisons=comparisons,
        warning=warning,
        methods=methods,
        differences=differences,
        kind=VIDEO if kind == VIDEO else None,
    )
    differing = [line for d in differences for line in difference_summary(d)]
    by_dataset = {m.dataset: [n for n in methods if n.dataset == m.dataset] for m in methods}
    if kind == VIDEO:
        sections = [line for d, ms in by_dataset.items() for line in _video_section(d, ms)]
        sections += difference_lines(differences, cell)
        report = write_markdown(
            out_dir, "sam3-agent video evaluation report", VIDEO_INTRO, methods, sections, cell
        )
        summary = [line for m in methods for line in _video_summary(m)]
        summary += [comparison_line(c, "beside") for c in comparisons] + differing
        return ReportFiles(metrics_path, report, methods, comparisons, warning, summary)
    histogram = write_histogram(methods, out_dir / HISTOGRAM)
    gallery = write_gallery(methods, out_dir / GALLERY_DIR, gallery_size)
    sections = [
        line for d, ms in by_dataset.items() for line in _dataset_section(d, ms, gallery, out_dir)
    ]
    if histogram is not None:
        rel = histogram.relative_to(out_dir).as_posix()
        sections += ["## IoU distribution", "", f"![IoU histogram]({rel})", ""]
    sections += difference_lines(differences)
    report = write_markdown(out_dir, "sam3-agent evaluation report", IMAGE_INTRO, methods, sections)
    summary = [
        f"{m.label}: {o.count} samples, gIoU {pct(o.giou)}, cIoU {pct(o.ciou)}, failed {o.failed}"
        for m in methods
        for o in [m.metrics.overall]
    ]
    summary += [comparison_line(c, "against") for c in comparisons] + differing
    pictures = [g.path for g in gallery]
    return ReportFiles(
        metrics_path, report, methods, comparisons, warning, summary, histogram, pictures
    )


def _main_columns(dataset: str, methods: Sequence[Method]) -> list[tuple[str, str, str | None]]:
    """``(column group title, split, tag)`` in paper order."""
    columns: list[tuple[str, str, str | None]] = []
    for split in ordered_splits({s for m in methods for s in m.metrics.splits}):
        # As in the LISA paper: ReasonSeg val overall only, test as short / long / overall.
        if dataset == "reasonseg" and split != "val":
            tags = {t for m in methods for t in m.metrics.split_tags.get(split, {})}
            for tag in ("short", "long"):
                if tag in tags:
                    columns.append((f"{split} {tag}", split, tag))
            columns.append((f"{split} overall" if tags else split, split, None))
        else:
            columns.append((split, split, None))
    return columns


def _dataset_section(
    dataset: str, methods: Sequence[Method], gallery: Sequence[GalleryItem], out_dir: Path
) -> list[str]:
    grefcoco = dataset == "grefcoco"
    lines = [f"## {dataset_title(dataset)}", ""]
    columns = _main_columns(dataset, methods)
    header = ["method"]
    for name, _, _ in columns:
        header += [f"{name} gIoU", f"{name} cIoU"]
        if grefcoco:
            header += [f"{name} N-acc", f"{name} T-acc"]
    published = _published_rows(dataset, columns, grefcoco)
    # Published figures cover whole splits: a run beside them says how much of each it scored.
    if published:
        header.append("samples scored")
    rows = []
    for m in methods:
        row = [m.label]
        for _, split, tag in columns:
            s = m.summary(split, tag)
            row += [pct(s.giou if s else None), pct(s.ciou if s else None)]
            if grefcoco:
                row += [pct(s.n_acc if s else None), pct(s.t_acc if s else None)]
        if published:
            row.append("; ".join(f"{split} {m.coverage(split).text}" for split in m.splits()))
        rows.append(row)
    warning = partial_warning(methods)
    if warning:
        lines += [f"**Warning:** {warning}.", ""]
    lines += ["### gIoU / cIoU (%)", "", table(header, rows + published), ""]
    if published:
        sources = sorted({r.source for r in for_dataset(dataset)})
        lines += [f"Rows marked (published): {'; '.join(sources)}.", ""]
    comparisons = compare_with_published(methods)
    if comparisons:
        lines += ["### Against the published figures (same MLLM)", ""]
        lines += [comparison_table(comparisons, lambda r: r.model), ""]

    pr_header = ["method", "split", *(f"Pr@{t:g}" for t in PR_THRESHOLDS)]
    pr_rows = []
    for m in methods:
        for split in m.scored_splits():
            pr = m.metrics.splits[split].precision or {}
            pr_rows.append([m.label, split, *(pct(pr.get(t)) for t in PR_THRESHOLDS)])
    # ReLA's Pr@ counts target samples only: an empty answer to a no-target sample is no hit.
    scope = "target samples" if grefcoco else "samples"
    lines += [f"### Precision (% of {scope} with IoU at or above the threshold)", ""]
    lines += [table(pr_header, pr_rows), ""]

    run_rows = [
        run_cells(m.label, m.usage(), agent=m.config.get("mode") != "sam3-only") for m in methods
    ]
    lines += ["### Run", "", table(RUN_HEADER, run_rows), ""]
    lines += failed_lines([(m.label, i, msg) for m in methods for i, msg in m.metrics.failed])

    items = [g for g in gallery if g.method.dataset == dataset]
    if items:
        lines += ["### Worst samples (prediction | ground truth)", ""]
        for g in items:
            rel = g.path.relative_to(out_dir).as_posix()
            query = g.result.query.replace("|", "\\|").replace("\n", " ")
            caption = f"**{g.result.id}** ({g.method.label}), IoU {g.result.iou:.3f}: “{query}”"
            lines += [caption, "", f"![{g.result.id}]({rel})", ""]
    return lines


def _published_rows(
    dataset: str, columns: Sequence[tuple[str, str, str | None]], grefcoco: bool
) -> list[list[str]]:
    """Rows of published figures in the main table's columns; only rows with a figure there."""
    by_model: dict[str, dict[tuple[str, str | None, str], float]] = {}
    for r in for_dataset(dataset):
        by_model.setdefault(r.label, {})[(r.split, r.tag, r.metric)] = r.value
    rows = []
    for label, cells in by_model.items():
        row = [label]
        for _, split, tag in columns:
            for metric in ("gIoU", "cIoU"):
                value = cells.get((split, tag, metric))
                row.append("–" if value is None else f"{value:.1f}")
            if grefcoco:
                row += ["–", "–"]
        if any(c != "–" for c in row[1:]):
            rows.append([*row, "whole split"])
    return rows


def partial_warning(methods: Sequence[Method]) -> str | None:
    """The coverage warning of the runs beside published figures (None: nothing to say)."""
    compared = [
        (m, s)
        for m in methods
        for s in m.splits()
        if s in {r.split for r in for_dataset(m.dataset)}
    ]
    return partial_text((m.label, s, m.coverage(s)) for m, s in compared)


def compare_with_published(
    methods: Sequence[Method | VideoMethod], *, video: bool = False
) -> list[Compared]:
    """Every published figure whose MLLM, dataset and split a method's run matches; for
    ``video`` every one of the dataset (on each of the run's splits where none is stated)."""
    comparisons = []
    for m in methods:
        if m.config.get("mode") == "sam3-only":
            continue
        for r in for_dataset(m.dataset):
            if not video and not matches(r, m.config.get("model")):
                continue
            for split in [r.split] if r.split else list(m.scored_splits()):
                summary = m.summary(split, r.tag)
                value = None if summary is None else summary.figure(r.metric)
                if value is not None:
                    coverage = m.coverage(split, r.tag)
                    comparisons.append(Compared(m.label, split, r, 100 * value, coverage, video))
    return comparisons


OVERALL = "overall"
"""The subset column's name for a split's overall figures."""

VIDEO_INTRO = (
    "Per annotated frame, J is the region IoU and F the contour F-measure as the DAVIS "
    "benchmark defines them (1.0 when prediction and target are both empty); a sample "
    "scores their means over its frames, a group the mean over its samples, and "
    "J&F = (J + F) / 2. The prediction at a frame is the union of the selected tracks. "
    "Failed samples count as empty predictions."
)


def video_warning(comparisons: Sequence[Compared]) -> str | None:
    """The coverage warning of the compared video runs (None: nothing to say)."""
    return partial_text(dict.fromkeys((c.method, c.split, c.coverage) for c in comparisons))


def _video_summary(m: VideoMethod) -> list[str]:
    """Per split: J, F, J&F overall and J&F per subset."""
    lines = []
    for split, scored in m.metrics.items():
        o = scored.overall
        subsets = ", ".join(f"{tag} {pct(s.jf)}" for tag, s in scored.tags.items())
        lines.append(
            f"{m.label}: {dataset_title(m.dataset)} {split}: {m.coverage(split).scored} "
            f"samples, J {pct(o.j)}, F {pct(o.f)}, J&F {pct(o.jf)}"
            + (f" (J&F by subset: {subsets})" if subsets else "")
            + f", failed {o.failed}"
        )
    return lines


def _metric_rows(m: VideoMethod, with_coverage: bool) -> list[list[str]]:
    rows = []
    for split, scored in m.metrics.items():
        subsets: list[tuple[str, str | None, VideoSummary]] = [(OVERALL, None, scored.overall)]
        subsets += [(tag, tag, s) for tag, s in scored.tags.items()]
        for name, tag, s in subsets:
            row = [cell(m.label), split, name, str(s.count), pct(s.j), pct(s.f), pct(s.jf)]
            if with_coverage:
                row.append(m.coverage(split, tag).text)
            rows.append(row)
    return rows


def _video_section(dataset: str, methods: Sequence[VideoMethod]) -> list[str]:
    info = VIDEO_DATASETS.get(dataset)
    lines = [f"## {dataset_title(dataset)}", ""]
    published = []
    for r in for_dataset(dataset):
        cells = {"J": "–", "F": "–", "J&F": "–"}
        cells[r.metric] = f"{r.value:.1f}"
        split = r.split or "not stated"
        published.append([r.label, split, r.tag or OVERALL, "–", *cells.values(), "whole split"])
    comparisons = compare_with_published(methods, video=True)
    warning = video_warning(comparisons)
    if warning:
        lines += [f"**Warning:** {warning}.", ""]
    header = ["method", "split", "subset", "samples", "J", "F", "J&F"]
    if published:
        header.append("samples scored")
    rows = [row for m in methods for row in _metric_rows(m, bool(published))]
    lines += ["### J / F / J&F (%)", "", table(header, rows + published), ""]
    if info is not None and info.overall_from:
        lines += [
            f"The overall figure is the mean of the {' and '.join(info.overall_from)} "
            "subsets' means, as the official evaluation computes it.",
            "",
        ]
    if published:
        sources = sorted({r.source for r in for_dataset(dataset)})
        lines += [
            f"Rows marked (published): {'; '.join(sources)}. The source does not state which "
            "MLLM produced each figure: they stand beside ours, not as the same model.",
            "",
        ]
    if comparisons:
        lines += ["### Beside the published figures", ""]
        lines += [comparison_table(comparisons, lambda r: r.label, cell), ""]
    run_rows = []
    for m in methods:
        u = m.usage()
        frames = u["frames_scored_per_sample"]
        cost = run_cells(cell(m.label), u)
        run_rows.append([*cost, "–" if frames is None else f"{frames:.1f}"])
    header = [*RUN_HEADER, "frames scored / sample"]
    lines += ["### Run", "", table(header, run_rows), ""]
    failed = [(m.label, i, msg) for m in methods for b in m.metrics.values() for i, msg in b.failed]
    return lines + failed_lines(failed, cell)
