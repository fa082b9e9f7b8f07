// An LD_PRELOAD library that records the calls behind durable writes: opens for writing, fsync and
// fdatasync, renames and mkdir, one line each, appended to the file ZERO_FSYNC_LOG names (one
// write(2) per line on an O_APPEND descriptor, so the ranks of an mpirun job share one log in
// the order the calls returned). Files and folders are identified by device and inode, so a
// descriptor fsynced after its file was renamed is still its file. durable_order_check.py reads
// the log. Every call is passed on to libc unchanged (RTLD_NEXT); only successful calls are
// recorded. Lines, tab-separated:
//   open   PID TID DEV:INO KIND PARENT PATH              opened to write (O_WRONLY, O_RDWR,
//                                                        O_CREAT, O_TRUNC; fopen "w", "a", "+")
//   fsync  PID TID DEV:INO KIND PATH                     fsync or fdatasync
//   rename PID TID DEV:INO KIND FROM_PARENT TO_PARENT FROM TO
//   mkdir  PID TID DEV:INO d PARENT PATH
// KIND is f (a file) or d (a folder); PARENT the folder's DEV:INO; paths are absolute.
#undef _FORTIFY_SOURCE  // this file defines open(); the fortified inline one would clash
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace {

// The next definition of `name` after this library's: libc's.
template <typename Function>
Function next(Function& cached, const char* name) {
  if (cached == nullptr) cached = reinterpret_cast<Function>(::dlsym(RTLD_NEXT, name));
  return cached;
}

int log_fd() {
  static int fd = -2;
  if (fd == -2) {
    const char* path = ::getenv("ZERO_FSYNC_LOG");
    using OpenFunction = int (*)(const char*, int, ...);
    static OpenFunction real_open = nullptr;
    fd = path == nullptr
             ? -1
             : next(real_open, "open")(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  return fd;
}

void append(const char* format, ...) {
  const int fd = log_fd();
  if (fd < 0) return;
  char line[3 * PATH_MAX + 256];
  va_list arguments;
  va_start(arguments, format);
  const int size = ::vsnprintf(line, sizeof(line), format, arguments);
  va_end(arguments);
  if (size > 0 && static_cast<size_t>(size) < sizeof(line)) {
    const ssize_t ignored = ::write(fd, line, static_cast<size_t>(size));
    (void)ignored;
  }
}

struct Identity {
  unsigned long long device = 0, inode = 0;
  char kind = '?';
};

Identity identity_of(const struct stat& info) {
  return {static_cast<unsigned long long>(info.st_dev),
          static_cast<unsigned long long>(info.st_ino), S_ISDIR(info.st_mode) ? 'd' : 'f'};
}

Identity identity_at(int directory, const char* path) {
  struct stat info {};
  if (::fstatat(directory, path, &info, AT_SYMLINK_NOFOLLOW) != 0) return {};
  return identity_of(info);
}

// The path a descriptor names (/proc/self/fd), into `out` of PATH_MAX bytes ("" if unknown).
void descriptor_path(int fd, char* out) {
  char link[64];
  ::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t size = ::readlink(link, out, PATH_MAX - 1);
  out[size > 0 ? size : 0] = '\0';
}

// The absolute path of `path` taken from `directory` (AT_FDCWD or a descriptor): its parent
// resolved by realpath, its last component as given. `parent` receives the parent's identity.
void absolute_path(int directory, const char* path, char* out, Identity& parent) {
  char folder[PATH_MAX];
  const char* slash = ::strrchr(path, '/');
  const char* name = slash == nullptr ? path : slash + 1;
  if (path[0] == '/') {
    ::snprintf(folder, sizeof(folder), "%.*s", slash == path ? 1 : static_cast<int>(slash - path),
               path);
  } else {
    char base[PATH_MAX];
    if (directory == AT_FDCWD) {
      if (::getcwd(base, sizeof(base)) == nullptr) base[0] = '\0';
    } else {
      descriptor_path(directory, base);
    }
    if (slash == nullptr) {
      ::snprintf(folder, sizeof(folder), "%s", base);
    } else {
      ::snprintf(folder, sizeof(folder), "%s/%.*s", base, static_cast<int>(slash - path), path);
    }
  }
  char resolved[PATH_MAX];
  if (::realpath(folder, resolved) == nullptr) ::snprintf(resolved, sizeof(resolved), "%s", folder);
  const int size =
      ::snprintf(out, PATH_MAX, "%s/%s", strcmp(resolved, "/") == 0 ? "" : resolved, name);
  if (size < 0 || size >= PATH_MAX) out[0] = '\0';  // too long: recorded as an empty path
  parent = identity_at(AT_FDCWD, resolved);
}

long thread_id() { return ::syscall(SYS_gettid); }

// An open (`opening`) or an fsync of `fd`, recorded as the header comment says.
void record_descriptor(int fd, bool opening) {
  const int saved = errno;
  char path[PATH_MAX];
  descriptor_path(fd, path);
  struct stat info {};
  if (::fstat(fd, &info) == 0) {
    const Identity file = identity_of(info);
    if (opening) {
      char absolute[PATH_MAX];
      Identity parent;
      absolute_path(AT_FDCWD, path, absolute, parent);
      append("open\t%d\t%ld\t%llu:%llu\t%c\t%llu:%llu\t%s\n", ::getpid(), thread_id(), file.device,
             file.inode, file.kind, parent.device, parent.inode, path);
    } else {
      append("fsync\t%d\t%ld\t%llu:%llu\t%c\t%s\n", ::getpid(), thread_id(), file.device,
             file.inode, file.kind, path);
    }
  }
  errno = saved;
}

void record_open(int fd, int flags) {
  if (fd >= 0 && (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0)
    record_descriptor(fd, true);
}

void record_fsync(int fd) { record_descriptor(fd, false); }

int open_flags_of_mode(const char* mode) {
  if (mode == nullptr) return 0;
  return (::strchr(mode, 'w') || ::strchr(mode, 'a') || ::strchr(mode, '+')) ? O_WRONLY : 0;
}

// A rename: the source's identity and parent before the call, recorded after it succeeded.
template <typename Call>
int recorded_rename(int from_directory, const char* from, int to_directory, const char* to,
                    Call call) {
  const Identity moved = identity_at(from_directory, from);
  char from_path[PATH_MAX], to_path[PATH_MAX];
  Identity from_parent, to_parent;
  absolute_path(from_directory, from, from_path, from_parent);
  absolute_path(to_directory, to, to_path, to_parent);
  const int result = call();
  if (result == 0) {
    const int saved = errno;
    append("rename\t%d\t%ld\t%llu:%llu\t%c\t%llu:%llu\t%llu:%llu\t%s\t%s\n", ::getpid(),
           thread_id(), moved.device, moved.inode, moved.kind, from_parent.device,
           from_parent.inode, to_parent.device, to_parent.inode, from_path, to_path);
    errno = saved;
  }
  return result;
}

// libc's fopen or fopen64 (`name`), recorded.
FILE* recorded_fopen(const char* name, const char* path, const char* mode) {
  using Function = FILE* (*)(const char*, const char*);
  static Function real_fopen = nullptr, real_fopen64 = nullptr;
  Function& real = name[5] == '\0' ? real_fopen : real_fopen64;
  FILE* file = next(real, name)(path, mode);
  if (file != nullptr) record_open(::fileno(file), open_flags_of_mode(mode));
  return file;
}

// libc's fsync or fdatasync (`name`), recorded.
int recorded_sync(const char* name, int fd) {
  using Function = int (*)(int);
  static Function real_fsync = nullptr, real_fdatasync = nullptr;
  Function& real = name[1] == 's' ? real_fsync : real_fdatasync;
  const int result = next(real, name)(fd);
  if (result == 0) record_fsync(fd);
  return result;
}

mode_t mode_argument(int flags, va_list arguments) {
  return (flags & (O_CREAT | O_TMPFILE)) != 0 ? static_cast<mode_t>(va_arg(arguments, int)) : 0;
}

}  // namespace

extern "C" {

#define ZERO_RECORDED_OPEN(name)                         \
  int name(const char* path, int flags, ...) {           \
    using Function = int (*)(const char*, int, ...);     \
    static Function real = nullptr;                      \
    va_list arguments;                                   \
    va_start(arguments, flags);                          \
    const mode_t mode = mode_argument(flags, arguments); \
    va_end(arguments);                                   \
    const int fd = next(real, #name)(path, flags, mode); \
    record_open(fd, flags);                              \
    return fd;                                           \
  }
ZERO_RECORDED_OPEN(open)
ZERO_RECORDED_OPEN(open64)
#undef ZERO_RECORDED_OPEN

#define ZERO_RECORDED_OPENAT(name)                                  \
  int name(int directory, const char* path, int flags, ...) {       \
    using Function = int (*)(int, const char*, int, ...);           \
    static Function real = nullptr;                                 \
    va_list arguments;                                              \
    va_start(arguments, flags);                                     \
    const mode_t mode = mode_argument(flags, arguments);            \
    va_end(arguments);                                              \
    const int fd = next(real, #name)(directory, path, flags, mode); \
    record_open(fd, flags);                                         \
    return fd;                                                      \
  }
ZERO_RECORDED_OPENAT(openat)
ZERO_RECORDED_OPENAT(openat64)
#undef ZERO_RECORDED_OPENAT

// _FORTIFY_SOURCE's checked opens (flags not known at compile time, no mode).
int __open_2(const char* path, int flags) { return open(path, flags); }
int __open64_2(const char* path, int flags) { return open64(path, flags); }
int __openat_2(int directory, const char* path, int flags) {
  return openat(directory, path, flags);
}
int __openat64_2(int directory, const char* path, int flags) {
  return openat64(directory, path, flags);
}

int creat(const char* path, mode_t mode) { return open(path, O_WRONLY | O_CREAT | O_TRUNC, mode); }
int creat64(const char* path, mode_t mode) {
  return open64(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}

// std::ofstream opens through fopen, whose own open(2) libc makes internally.
FILE* fopen(const char* path, const char* mode) { return recorded_fopen("fopen", path, mode); }
FILE* fopen64(const char* path, const char* mode) { return recorded_fopen("fopen64", path, mode); }

int fsync(int fd) { return recorded_sync("fsync", fd); }
int fdatasync(int fd) { return recorded_sync("fdatasync", fd); }

int rename(const char* from, const char* to) {
  using Function = int (*)(const char*, const char*);
  static Function real = nullptr;
  return recorded_rename(AT_FDCWD, from, AT_FDCWD, to,
                         [&] { return next(real, "rename")(from, to); });
}
int renameat(int from_directory, const char* from, int to_directory, const char* to) {
  using Function = int (*)(int, const char*, int, const char*);
  static Function real = nullptr;
  return recorded_rename(from_directory, from, to_directory, to, [&] {
    return next(real, "renameat")(from_directory, from, to_directory, to);
  });
}
int renameat2(int from_directory, const char* from, int to_directory, const char* to,
              unsigned int flags) {
  using Function = int (*)(int, const char*, int, const char*, unsigned int);
  static Function real = nullptr;
  return recorded_rename(from_directory, from, to_directory, to, [&] {
    return next(real, "renameat2")(from_directory, from, to_directory, to, flags);
  });
}

int mkdir(const char* path, mode_t mode) {
  using Function = int (*)(const char*, mode_t);
  static Function real = nullptr;
  const int result = next(real, "mkdir")(path, mode);
  if (result == 0) {
    const int saved = errno;
    char absolute[PATH_MAX];
    Identity parent;
    absolute_path(AT_FDCWD, path, absolute, parent);
    const Identity folder = identity_at(AT_FDCWD, path);
    append("mkdir\t%d\t%ld\t%llu:%llu\td\t%llu:%llu\t%s\n", ::getpid(), thread_id(), folder.device,
           folder.inode, parent.device, parent.inode, absolute);
    errno = saved;
  }
  return result;
}

}  // extern "C"
