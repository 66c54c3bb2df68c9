/* SPDX-License-Identifier: MIT */
/*
 * plot.c: figures against message size as an SVG, drawn by gnuplot(1);
 * strixpeerctl bench's plot and strixpeerctl gpu proof's. Failures go
 * through sp_bench_fail() (sp_bench_errmsg() says why).
 */
#ifndef SP_BENCH_PLOT_H
#define SP_BENCH_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One panel: a row per message size, a column (a line) per series. */
struct sp_plot_panel {
	const char *name;		/* the panel's title */
	size_t nrows;
	const uint64_t *x;		/* message sizes, bytes */
	unsigned int ncols;
	const char *const *col_names;	/* the lines' titles */
	const double *y;		/* nrows * ncols, row by row; NaN: none */
	const bool *col_shown;		/* NULL: every column with a value */
};

/*
 * sp_plot_svg() - write @svg (and @svg.dat, @svg.gp, @svg.log beside it)
 * @svg: output file
 * @title: the plot's title (cut at a newline)
 * @ylabel: the y axis' label
 * @width: pixels
 * @height: pixels
 * @p: panels; one without a value is left out of the picture (not the data)
 * @np: how many
 *
 * Return: 0; -ENODATA with no value anywhere; -ENOENT when gnuplot is not
 * installed; or negative errno.
 */
int sp_plot_svg(const char *svg, const char *title, const char *ylabel, unsigned int width,
		unsigned int height, const struct sp_plot_panel *p, unsigned int np);

#endif
