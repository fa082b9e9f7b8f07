// A small launcher for the Gloo tests: starts N copies of a command as the ranks of one job with
// the environment a launcher would give them, on a free port, and waits for all of them.
//   launch_ranks [--env torchrun|slurm] [--timeout S] N -- COMMAND ARGS...
//       sets RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE (torchrun's names, the default) or
//       SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID/SLURM_NTASKS_PER_NODE, with MASTER_ADDR=127.0.0.1
//       and MASTER_PORT a free port.
//   launch_ranks --torchrun PYTHON [--standalone] [--timeout S] N -- COMMAND ARGS...
//       runs PYTHON -m torch.distributed.run --nproc_per_node N --no-python COMMAND ARGS...,
//       with its store on a free port (static rendezvous: the workers use torchrun's agent store)
//       or, with --standalone, torchrun's own c10d rendezvous.
// Exits 0 when every rank exited 0, 77 when every rank exited 0 or 77 (a skip), 124 on timeout
// (every rank still running is killed), else 1; prints how each failed rank ended.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../common/free_port.h"

namespace {

int free_port() {
  const int port = zero::testing::free_port();
  if (port < 0) {
    std::perror("launch_ranks: cannot find a free port");
    std::exit(1);
  }
  return port;
}

[[noreturn]] void usage() {
  std::fprintf(
      stderr,
      "usage: launch_ranks [--env torchrun|slurm] [--timeout S] N -- COMMAND...\n"
      "       launch_ranks --torchrun PYTHON [--standalone] [--timeout S] N -- COMMAND...\n");
  std::exit(2);
}

}  // namespace

// Waits for every child until `timeout_s` has passed, then kills those still running (SIGKILL)
// and reaps them; status[r] is child r's wait status. False when some child had to be killed.
bool wait_all(const std::vector<pid_t>& children, double timeout_s, std::vector<int>& status) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
  std::size_t running = children.size();
  while (running > 0) {
    for (std::size_t r = 0; r < children.size(); ++r) {
      if (status[r] != -1) continue;
      int s = 0;
      if (::waitpid(children[r], &s, WNOHANG) == children[r]) {
        status[r] = s;
        --running;
      }
    }
    if (running == 0) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (std::size_t r = 0; r < children.size(); ++r)
        if (status[r] == -1) ::kill(children[r], SIGKILL);
      for (std::size_t r = 0; r < children.size(); ++r)
        if (status[r] == -1) ::waitpid(children[r], &status[r], 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

int main(int argc, char** argv) {
  std::string env = "torchrun", python;
  bool standalone = false;
  double timeout_s = 60;
  int ranks = 0, i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--env" && i + 1 < argc) {
      env = argv[++i];
    } else if (arg == "--torchrun" && i + 1 < argc) {
      python = argv[++i];
    } else if (arg == "--standalone") {
      standalone = true;
    } else if (arg == "--timeout" && i + 1 < argc) {
      timeout_s = std::atof(argv[++i]);
    } else if (arg == "--") {
      ++i;
      break;
    } else {
      ranks = std::atoi(argv[i]);
    }
  }
  if (ranks < 1 || i >= argc || (env != "torchrun" && env != "slurm")) usage();
  const int port = free_port();

  std::vector<std::vector<std::string>> commands;
  if (!python.empty()) {
    std::vector<std::string> command{python, "-m", "torch.distributed.run", "--nproc_per_node",
                                     std::to_string(ranks)};
    if (standalone) {
      command.push_back("--standalone");
    } else {
      for (const char* a : {"--nnodes", "1", "--node_rank", "0", "--master_addr", "127.0.0.1"})
        command.push_back(a);
      command.push_back("--master_port");
      command.push_back(std::to_string(port));
    }
    // torch 1.13's torchrun under Python 3.12 fails on its default redirects ("0": Std.NONE is
    // not iterated from an IntFlag any more); stderr redirected and teed (2) parses and shows it.
    for (const char* a : {"--redirects", "2", "--tee", "2"}) command.push_back(a);
    command.push_back("--no_python");  // torch 1.x spells it so; 2.x takes both
    for (int j = i; j < argc; ++j) command.push_back(argv[j]);
    commands.push_back(command);
  } else {
    for (int r = 0; r < ranks; ++r) commands.emplace_back(argv + i, argv + argc);
  }

  std::vector<pid_t> children;
  for (std::size_t r = 0; r < commands.size(); ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("launch_ranks: fork");
      return 1;
    }
    if (pid == 0) {
      if (python.empty()) {
        const std::string rank = std::to_string(r), world = std::to_string(ranks);
        const bool slurm = env == "slurm";
        ::setenv(slurm ? "SLURM_PROCID" : "RANK", rank.c_str(), 1);
        ::setenv(slurm ? "SLURM_NTASKS" : "WORLD_SIZE", world.c_str(), 1);
        ::setenv(slurm ? "SLURM_LOCALID" : "LOCAL_RANK", rank.c_str(), 1);
        ::setenv(slurm ? "SLURM_NTASKS_PER_NODE" : "LOCAL_WORLD_SIZE", world.c_str(), 1);
        ::setenv("MASTER_ADDR", "127.0.0.1", 1);
        ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      }
      std::vector<char*> args;
      for (std::string& a : commands[r]) args.push_back(a.data());
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      std::perror("launch_ranks: exec");
      std::_Exit(127);
    }
    children.push_back(pid);
  }

  std::vector<int> status(children.size(), -1);
  const bool timed_out = !wait_all(children, timeout_s, status);
  if (timed_out) {
    std::fprintf(stderr, "launch_ranks: ranks still running after %g s were killed (a hang)\n",
                 timeout_s);
    return 124;
  }
  bool failed = false, skipped = false;
  for (std::size_t r = 0; r < children.size(); ++r) {
    const int s = status[r];
    if (WIFEXITED(s) && WEXITSTATUS(s) == 0) continue;
    if (WIFEXITED(s) && WEXITSTATUS(s) == 77) {
      skipped = true;
      continue;
    }
    failed = true;
    if (WIFEXITED(s))
      std::fprintf(stderr, "launch_ranks: process %zu exited with %d\n", r, WEXITSTATUS(s));
    else
      std::fprintf(stderr, "launch_ranks: process %zu killed by signal %d\n", r, WTERMSIG(s));
  }
  return failed ? 1 : skipped ? 77 : 0;
}
