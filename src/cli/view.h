//> handout
/* view.h: mha view, a forward pass as one HTML page (view.c). */
#ifndef MHA_CLI_VIEW_H
#define MHA_CLI_VIEW_H

/* `mha view --help`. */
extern const char cli_view_usage[];

/* mha view with the arguments after "view": CLI_OK, or CLI_USAGE after
 * one line on stderr with --html's file as it was. */
int cli_view(int argc, char **argv);

#endif
//<
