// Package fstools gives the model read-only access to one directory: the
// tools list_files, read_file and grep, confined to that directory.
//
// [Open] opens the directory as an [os.Root], so every file the tools touch
// is reached through it: a path that leaves the directory, by "..", as an
// absolute path or through a symbolic link that points outside, is refused
// by the operating system's own checks, not only by string tests. The tools
// also check each path first, so that the model is told in plain words why
// a path was refused ("path \"../etc/passwd\" is outside the working
// directory") and the error wraps [ErrOutside]. Symbolic links that stay
// inside the directory work as usual, if their target is a relative path:
// an os.Root refuses a link to an absolute path, wherever it points.
//
//	root, err := fstools.Open("./docs", nil)
//	if err != nil {
//		return err
//	}
//	defer root.Close()
//	r := toolrun.New(client, params, root.Tools(), nil)
//
// # Tools
//
//   - list_files lists a directory, or with recursive the tree under it:
//     directories end with "/", files show their size, symbolic links are
//     marked and not followed.
//   - read_file reads a text file, with line numbers, from a line (offset)
//     for a number of lines (limit). A binary file is refused.
//   - grep finds the lines that match a regular expression (RE2 syntax) in
//     a file or a tree, optionally only in files whose name matches a glob;
//     it skips binary files and does not follow symbolic links to
//     directories.
//
// Only regular files are read or searched. A named pipe, a device or a
// socket, or a link to one, is refused with an error that wraps
// [ErrNotRegular], without being opened (opening a FIFO blocks until a
// writer comes); a search of a directory skips them. Reads look at the
// call's context every 64 KiB, so a cancelled call stops promptly, and
// read no more than 1 MiB of one line: a file with a longer line, such as
// a huge file without line endings, is read up to there, with a note that
// says so.
//
// Every result is bounded ([Options]): lines are cut at a length, and a
// listing, a read or a search that would return more says where it stopped
// and how to get the rest. Nothing is ever written, and the tools are
// declared [toolrun.ToolConfig].Idempotent, so a durable run may run a call
// again after a crash.
package fstools
