"""The HTML report of a scored batch: inline SVG charts, no external resources."""

from adapters.report.html import DEFAULT_MAX_DEBATES, Report, render_html, render_report, svg_histogram

__all__ = ["DEFAULT_MAX_DEBATES", "Report", "render_html", "render_report", "svg_histogram"]
