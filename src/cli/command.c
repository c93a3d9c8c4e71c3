// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/view.h"
#include "model/profile.h"
#include "util/log.h"
#include "util/sink.h"
#include "command.h"
#include "open.h"

static const char **path_field(void *opts, size_t off)
{
	return (const char **)((char *)opts + off);
}

int cmd_parse(const struct command *cmd, int argc, char **argv, void *opts)
{
	unsigned flags = cmd->flags & CMD_IN_ORDER ? OPT_IN_ORDER : 0;
	int first, npos, err;
	char **pos;

	memcpy(opts, cmd->defaults, cmd->opts_size);
	err = opt_parse(cmd->opts, flags, cmd->name, argc, argv, opts, &first);
	if (err)
		return err;
	pos = argv + first;
	npos = argc - first;
	if (cmd->ninputs == 2 && npos != 2) {
		log_err("%s: expected two recordings: eprof %s %s", cmd->name, cmd->name,
			cmd->usage);
		return -EINVAL;
	}
	if (cmd->ninputs && npos > cmd->ninputs && !(cmd->flags & CMD_JOB)) {
		log_err("%s: unexpected argument '%s'", cmd->name, pos[cmd->ninputs]);
		return -EINVAL;
	}
	for (int i = 0; i < cmd->ninputs && npos; i++, npos--)
		*path_field(opts, cmd->input[i]) = *pos++;
	if (cmd->flags & CMD_JOB) {
		struct job_inputs *ji = (struct job_inputs *)((char *)opts + cmd->job_inputs);

		ji->pos = pos;
		ji->npos = npos;
		pos += npos;
		npos = 0;
	}
	if (cmd->finish)
		return cmd->finish(opts, npos, pos);
	if (npos) {
		log_err("%s: unexpected argument '%s'", cmd->name, pos[0]);
		return -EINVAL;
	}
	return 0;
}

int cmd_help(const struct command *cmd, struct sink *out)
{
	sink_printf(out, "usage: eprof %s %s\n", cmd->name, cmd->usage);
	if (cmd->about)
		sink_puts(out, cmd->about);
	opt_help(cmd->opts, out);
	if (cmd->ninputs)
		sink_puts(out, "      --force             another user's recording: name its "
			       "frames from the files it\n                          lists and "
			       "from this machine's kernel\n");
	if (cmd->footer)
		sink_puts(out, cmd->footer);
	return out->err;
}

struct sink *cmd_output(struct cmd_ctx *c)
{
	if (c->out)
		return c->out;
	c->out = sink_open(c->out_path, 0);
	if (c->out && c->text_out)
		c->out = sink_text(c->out);
	if (!c->out && errno == EINVAL)
		log_err("failed to open output '%s': not a regular file (write to a file or '-')",
			c->out_path);
	else if (!c->out)
		log_err("failed to open output '%s': %s", c->out_path, strerror(errno));
	return c->out;
}

/* A write error, or one run returned (-errno), is said here: exit status 1. */
static int close_output(struct cmd_ctx *c, int rc)
{
	int err = c->out ? sink_close(c->out) : 0;

	c->out = NULL;
	if (rc < 0)
		err = rc;
	if (!err)
		return rc;
	if (!c->out_path)
		log_err("%s: %s", c->cmd->name, strerror(-err));
	else if (!strcmp(c->out_path, "-"))
		log_err("failed to write to stdout: %s", strerror(-err));
	else
		log_err("failed to write '%s': %s", c->out_path, strerror(-err));
	return rc > 0 ? rc : 1;
}

static int print_help(const struct command *cmd)
{
	struct sink *out = sink_file(stdout, 0);
	int err;

	if (!out)
		return 1;
	cmd_help(cmd, out);
	err = sink_close(out);
	if (err)
		log_err("failed to write the help: %s", strerror(-err));
	return err ? 1 : 0;
}

/*
 * --force, which every command that reads recordings takes (open.h): taken out of argv before
 * the command's own options. Returns the new argc.
 */
static int take_force(int argc, char **argv)
{
	bool opts = true;
	int n = 1;

	for (int i = 1; i < argc; i++) {
		if (opts && !strcmp(argv[i], "--force")) {
			profile_open_force(true);
			continue;
		}
		opts = opts && strcmp(argv[i], "--");
		argv[n++] = argv[i];
	}
	argv[n] = NULL;
	return n;
}

const struct opt_choice cmd_view_choices[] = {
	{ "python", VIEW_PYTHON }, { "mixed", VIEW_MIXED }, { "native", VIEW_NATIVE }, { NULL }
};

/* --view: every input the command opened, put in the view once, before it reads them. */
static int apply_view(struct cmd_ctx *c)
{
	int v = *(const int *)((const char *)c->opts + c->cmd->view), err = 0;

	if (!(c->cmd->flags & CMD_VIEW) || v == VIEW_MIXED)
		return 0;
	for (int i = 0; i < CMD_MAX_INPUTS && !err; i++) {
		if (c->in[i])
			err = profile_apply_view(c->in[i], v);
		for (size_t k = 0; k < c->side[i].n && !err; k++)
			err = c->side[i].profs[k] ? profile_apply_view(c->side[i].profs[k], v) : 0;
	}
	for (size_t k = 0; k < c->njob && !err; k++)
		err = c->job[k] ? profile_apply_view(c->job[k], v) : 0;
	if (err)
		log_err("failed to put the stacks in the %s view: %s", view_name(v),
			strerror(-err));
	return err;
}

int cmd_main(const struct command *cmd, int argc, char **argv)
{
	struct cmd_ctx c = { .cmd = cmd };
	size_t njob = 0;
	int rc;

	c.opts = malloc(cmd->opts_size);
	if (!c.opts) {
		log_err("out of memory");
		return 1;
	}
	if (cmd->ninputs)
		argc = take_force(argc, argv);
	rc = cmd_parse(cmd, argc, argv, c.opts);
	if (rc == 1) {
		rc = print_help(cmd);
		goto out;
	}
	if (rc) {
		rc = rc == -EINVAL ? 2 : 1;
		goto out;
	}
	if (cmd->flags & CMD_JOB) {
		const struct job_inputs *ji =
		    (const struct job_inputs *)((char *)c.opts + cmd->job_inputs);

		rc = job_open(*path_field(c.opts, cmd->input[0]), ji->pos, ji->npos, &c.job,
			      &c.job_paths, &njob);
		if (rc) {
			rc = 1;
			goto out;
		}
		c.njob = njob;
		if (njob == 1) { /* one recording: the command as usual */
			c.in[0] = c.job[0];
			c.job[0] = NULL;
			c.njob = 0;
		} else if ((cmd->flags & CMD_JOB_MERGE) &&
			   job_merge(c.job, c.job_paths, njob, ji->rank, ji->host,
				     cmd->flags & CMD_JOB_RANK_ROOT, &c.in[0])) {
			rc = 1;
			goto out;
		}
	}
	for (int i = 0; i < cmd->ninputs && (cmd->flags & CMD_JOB_PAIR); i++) {
		struct job_side *sd = &c.side[i];

		if (job_open(*path_field(c.opts, cmd->input[i]), NULL, 0, &sd->profs, &sd->paths,
			     &sd->n)) {
			rc = 1;
			goto out;
		}
		if (sd->n == 1) { /* one recording: as usual */
			c.in[i] = sd->profs[0];
			sd->profs[0] = NULL;
			job_free(sd->profs, sd->paths, sd->n);
			*sd = (struct job_side){ 0 };
		}
	}
	for (int i = 0; i < cmd->ninputs && !(cmd->flags & (CMD_JOB | CMD_JOB_PAIR)); i++) {
		if (profile_open(*path_field(c.opts, cmd->input[i]), &c.in[i])) {
			rc = 1;
			goto out;
		}
	}
	if (apply_view(&c)) {
		rc = 1;
		goto out;
	}
	if (cmd->flags & CMD_OUTPUT)
		c.out_path = *path_field(c.opts, cmd->output);
	rc = close_output(&c, cmd->run(&c));
	if (!rc && cmd->after)
		rc = close_output(&c, cmd->after(&c));
out:
	if (c.state_free)
		c.state_free(c.state);
	for (int i = 0; i < cmd->ninputs; i++)
		profile__free(c.in[i]);
	job_free(c.job, c.job_paths, njob);
	for (int i = 0; i < CMD_MAX_INPUTS; i++)
		job_free(c.side[i].profs, c.side[i].paths, c.side[i].n);
	free(c.opts);
	return rc;
}
