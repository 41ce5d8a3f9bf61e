/* marks-filter: a source file as of one chapter (marks.h).
 *
 *     marks-filter NN FILE      print FILE as of chapter NN (01 .. 98, or
 *                               full), its marks left out
 *     marks-filter --handout NN FILE
 *                               the same with the lines marked "handout"
 *                               (mha, .npy files, the grading), as a
 *                               snapshot or a student's handout of
 *                               chapters 01 .. NN has it
 *
 * Exit 0 when the chapter has the file, 3 when it has none of it (every
 * line is inside a mark of a later chapter: tools/snapshot.sh then leaves
 * the file out), 2 on a malformed mark or an unreadable file, with one
 * line on stderr naming the file and the line. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "marks.h"

int main(int argc, char **argv)
{
    int handout = argc == 4 && strcmp(argv[1], "--handout") == 0;
    argv += handout;
    argc -= handout;
    int ch = argc == 3 ? marks_chapter(argv[1]) : -1;
    if (ch < 0 || ch == MARKS_HANDOUT) {
        fprintf(stderr, "usage: marks-filter [--handout] NN FILE (NN: 01 .. 98 "
                        "or full)\n");
        return 2;
    }
    if (handout)
        ch |= MARKS_WITH_HANDOUT;
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        perror(argv[2]);
        return 2;
    }
    char **lines = NULL, *line = NULL;
    size_t n = 0, cap = 0, len = 0;
    ssize_t got;
    while ((got = getline(&line, &len, f)) >= 0) {
        if (got > 0 && line[got - 1] == '\n')
            line[got - 1] = '\0';
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            char **more = realloc(lines, cap * sizeof *lines);
            if (!more) {
                fprintf(stderr, "marks-filter: out of memory\n");
                return 2;
            }
            lines = more;
        }
        lines[n++] = strdup(line);
    }
    free(line);
    fclose(f);
    marks_line *cls = calloc(n ? n : 1, sizeof *cls);
    char err[256];
    if (!cls || marks_classify(lines, n, ch, cls, err, sizeof err) != 0) {
        fprintf(stderr, "marks-filter: %s: %s\n", argv[2],
                cls ? err : "out of memory");
        return 2;
    }
    int any = 0;
    for (size_t i = 0; i < n; i++)
        if (cls[i].keep) {
            puts(lines[i]);
            any = 1;
        }
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    free(cls);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("marks-filter: stdout");
        return 2;
    }
    return any ? 0 : 3;
}
