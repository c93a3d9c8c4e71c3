/* SPDX-License-Identifier: MIT */
/* The curses screen of eprof top: drawing and keys. */
#ifndef EPROF_TOP_UI_H
#define EPROF_TOP_UI_H

#include <stdbool.h>

#include "top_model.h"

struct top_ui;

/* Takes over the terminal; NULL (errno set) when it is not one. */
struct top_ui *top_ui__new(struct top_view *v);
/* Gives the terminal back. */
void top_ui__free(struct top_ui *ui);
/* Reads pending keys. Returns 1 on quit; *redraw when the screen must be drawn again. */
int top_ui__keys(struct top_ui *ui, const struct top_model *m, const struct profile *p,
		 bool *paused, bool *redraw);
void top_ui__draw(struct top_ui *ui, const struct top_model *m, const struct profile *p,
		  const struct top_header *h);

#endif
