// SPDX-License-Identifier: MIT
#include <curses.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "top_metrics.h"
#include "top_ui.h"

enum ui_mode { UI_TABLE = 0, UI_CALLS, UI_HELP, UI_FILTER };

struct top_ui {
	struct top_view *v;
	enum ui_mode mode;
	int sel;	 /* selected row of the table */
	uint32_t callfn; /* function of the call view (funcs index: stable) */
	char filter[128], edit[128];
	size_t edit_n;
};

static const char help_text[] =
	"eprof top keys\n\n"
	"  q        quit (also Ctrl-C)\n"
	"  s        cycle sort: self, total, last interval\n"
	"  P        pause / resume the display\n"
	"  t        per-thread view\n"
	"  /        filter functions by substring (Enter applies, Esc clears)\n"
	"  Enter    callers and callees of the selected function (Esc goes back)\n"
	"  Up/Down  select (also j/k, PgUp/PgDn)\n"
	"  h        this help (any key closes it)\n\n"
	"Self%/Total% are decayed over past refreshes (x7/8 each), Last% and Samples\n"
	"cover the last refresh only.\n";

struct top_ui *top_ui__new(struct top_view *v)
{
	struct top_ui *ui;

	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		errno = ENOTTY;
		return NULL;
	}
	ui = calloc(1, sizeof(*ui));
	if (!ui)
		return NULL;
	ui->v = v;
	if (!initscr()) {
		free(ui);
		errno = ENOTTY;
		return NULL;
	}
	cbreak(); /* not raw: Ctrl-C still reaches the session's handler */
	noecho();
	nodelay(stdscr, TRUE);
	keypad(stdscr, TRUE);
	set_escdelay(25);
	curs_set(0);
	return ui;
}

void top_ui__free(struct top_ui *ui)
{
	if (!ui)
		return;
	endwin();
	free(ui);
}

static uint32_t selected_func(struct top_ui *ui, const struct top_model *m,
			      const struct profile *p, bool *ok)
{
	uint32_t *rows = malloc((m->funcs.n + 1) * sizeof(*rows)), fi = 0;
	size_t n = rows ? top_model__rows(m, p, ui->v, rows, m->funcs.n) : 0;

	*ok = n > 0;
	if (n) {
		if (ui->sel >= (int)n)
			ui->sel = n - 1;
		fi = rows[ui->sel];
	}
	free(rows);
	return fi;
}

static int filter_key(struct top_ui *ui, int c)
{
	if (c == 27) { /* Esc: no filter */
		ui->filter[0] = 0;
		ui->v->filter = NULL;
		ui->mode = UI_TABLE;
	} else if (c == '\n' || c == KEY_ENTER) {
		memcpy(ui->filter, ui->edit, sizeof(ui->filter));
		ui->v->filter = ui->filter[0] ? ui->filter : NULL;
		ui->mode = UI_TABLE;
		ui->sel = 0;
	} else if ((c == KEY_BACKSPACE || c == 127 || c == 8) && ui->edit_n) {
		ui->edit[--ui->edit_n] = 0;
	} else if (c >= 32 && c < 127 && ui->edit_n < sizeof(ui->edit) - 1) {
		ui->edit[ui->edit_n++] = c;
		ui->edit[ui->edit_n] = 0;
	}
	return 0;
}

static void move_sel(struct top_ui *ui, int c)
{
	int page = LINES > 10 ? LINES - 8 : 1;

	if (c == KEY_UP || c == 'k')
		ui->sel--;
	else if (c == KEY_DOWN || c == 'j')
		ui->sel++;
	else if (c == KEY_PPAGE)
		ui->sel -= page;
	else if (c == KEY_NPAGE)
		ui->sel += page;
	if (ui->sel < 0)
		ui->sel = 0;
}

static int table_key(struct top_ui *ui, const struct top_model *m, const struct profile *p,
		     int c, bool *paused)
{
	bool ok;

	switch (c) {
	case 'q':
		return 1;
	case 's':
		ui->v->sort = (ui->v->sort + 1) % TOP_SORT_MAX;
		break;
	case 'P':
	case 'p':
		*paused = !*paused;
		break;
	case 't':
		ui->v->threads = !ui->v->threads;
		ui->sel = 0;
		break;
	case '/':
		ui->mode = UI_FILTER;
		memcpy(ui->edit, ui->filter, sizeof(ui->edit));
		ui->edit_n = strlen(ui->edit);
		break;
	case 'h':
	case '?':
		ui->mode = UI_HELP;
		break;
	case '\n':
	case KEY_ENTER:
		ui->callfn = selected_func(ui, m, p, &ok);
		if (ok && !ui->v->threads)
			ui->mode = UI_CALLS;
		break;
	default:
		move_sel(ui, c);
	}
	return 0;
}

int top_ui__keys(struct top_ui *ui, const struct top_model *m, const struct profile *p,
		 bool *paused, bool *redraw)
{
	int c;

	while ((c = getch()) != ERR) {
		*redraw = true;
		if (c == KEY_RESIZE)
			continue;
		if (ui->mode == UI_FILTER) {
			filter_key(ui, c);
		} else if (ui->mode == UI_HELP) {
			ui->mode = UI_TABLE;
		} else if (ui->mode == UI_CALLS) {
			if (c == 'q')
				return 1;
			ui->mode = UI_TABLE; /* Esc, Enter, Left: back to the table */
		} else if (table_key(ui, m, p, c, paused)) {
			return 1;
		}
	}
	return 0;
}

/* Draws text line by line, clipped to the window; line hl in reverse video. */
static void draw_text(const char *text, int y0, int hl)
{
	int y = y0;

	for (const char *s = text; *s && y < LINES - 1; y++) {
		const char *e = strchr(s, '\n');
		int len = e ? e - s : (int)strlen(s);

		if (y == hl)
			attron(A_REVERSE);
		mvaddnstr(y, 0, s, len < COLS ? len : COLS);
		if (y == hl) {
			for (int x = len; x < COLS; x++)
				addch(' ');
			attroff(A_REVERSE);
		}
		s = e ? e + 1 : s + len;
	}
}

static void draw_status(struct top_ui *ui)
{
	if (ui->mode == UI_FILTER)
		mvprintw(LINES - 1, 0, "filter: %s_", ui->edit);
	else
		mvaddnstr(LINES - 1, 0,
			  "q quit  s sort  P pause  t threads  / filter  Enter callers/callees  h help",
			  COLS);
}

void top_ui__draw(struct top_ui *ui, const struct top_model *m, const struct profile *p,
		  const struct top_header *h)
{
	struct sink *mem = sink_mem(), *out = sink_text(mem);
	int hdr = 0, rows = LINES - 7 - (h->res && h->res->seen); /* the resource line */

	if (!out)
		return;
	erase();
	if (ui->mode == UI_HELP) {
		sink_puts(out, help_text);
	} else if (ui->mode == UI_CALLS && ui->callfn < m->funcs.n) {
		top_render_calls(out, m, p, ui->callfn, COLS, LINES - 2);
	} else {
		if (rows < 1)
			rows = 1;
		if (ui->sel >= rows)
			ui->sel = rows - 1;
		hdr = top_render(out, m, p, h, ui->v, COLS, rows);
	}
	draw_text(sink_mem_data(mem, NULL), 0,
		  ui->mode == UI_TABLE || ui->mode == UI_FILTER ? hdr + 1 + ui->sel : -1);
	draw_status(ui);
	refresh();
	sink_close(out);
}
