// core/safe_file.h — opening files for writing so that a link someone else left can never redirect
// the write.
//
// A folder moelab writes into (a run folder, a checkpoint folder) may come from someone else: a
// colleague's run, a tarball, a shared scratch space. If it holds a symbolic link where moelab
// expects one of its own files, a plain open(path, O_WRONLY | O_TRUNC) writes through the link: an
// audit linked a run folder's `loss.gnuplot.log` to `~/thesis.tex`, asked for a report, and the
// thesis was 0 bytes. So every file moelab writes is opened here, never by open(2) directly:
//
//   create_new_file(path)        a NEW regular file (O_CREAT | O_EXCL | O_NOFOLLOW): never an
//                                existing file, never through a link. For temporary files that are
//                                then renamed over the real name; rename(2) replaces a link at the
//                                destination by the file, it never writes into the link's target.
//   open_regular_file(path, f)   an existing or new regular file (appending, locking) with
//                                O_NOFOLLOW and O_NONBLOCK, checked with fstat to be a regular
//                                file: a link, a FIFO (which would block the open for ever), a
//                                device or a socket is refused with an Error naming it.
//   temporary_name(path)         "<path>.partial.<host>.<pid>": unique per process and per machine,
//                                so that jobs on several hosts sharing a folder (NFS, a job array)
//                                never write one temporary file together.
//   file_kind(path)              "a symbolic link to '...'", "a FIFO", "a folder", ... for messages.
//
// All of them use the POSIX calls directly (<fcntl.h>), so errors carry errno's reason.
#pragma once

#include <string>

namespace moelab {

// "<path>.<tag>.<host>.<pid>", the host name kept to letters, digits, '-' and '.' (at most 64).
std::string temporary_name(const std::string& path, const std::string& tag = "partial");

// This machine's host name as temporary_name uses it ("host" when it cannot be read).
std::string host_name_for_files();

// Creates `path` as a new, empty regular file open for writing (mode 0644) and returns its file
// descriptor, or -1 with errno set. A leftover file or link of that very name (an earlier process
// of this host with this pid that crashed) is unlinked first and the create is tried once more:
// unlink removes a link itself, never its target.
int create_new_file(const std::string& path);

// Opens `path` with `flags` (O_WRONLY, O_RDWR, O_APPEND, O_CREAT ...; O_NOFOLLOW and O_CLOEXEC are
// added) without following a link and only if it is a regular file; returns the descriptor.
// Throws moelab::Error "cannot <what> '<path>': it is a symbolic link ..." (or a FIFO, a device,
// a socket, a folder), or with errno's reason.
int open_regular_file(const std::string& path, int flags, const std::string& what);

// What is at `path`, without following a link: "a regular file", "a folder", "a symbolic link to
// 'TARGET'", "a FIFO", "a socket", "a character device", "a block device", "nothing" (no such
// entry), or "unreadable (<reason>)".
std::string file_kind(const std::string& path);

// True when `path` exists as an entry (lstat succeeds), link or not.
bool entry_exists(const std::string& path);

}  // namespace moelab
