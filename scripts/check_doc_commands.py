#!/usr/bin/env python3
"""Checks every shell command block of the docs: each command parses, and the short ones run.

Usage: check_doc_commands.py SOURCE_DIR BUILD_DIR

Reads the ```sh, ```bash, ```shell and ```console blocks (console: the "$ " lines) of README.md,
docs/*.md and the READMEs of examples/, bindings/ and model/*/ (benchmarks/RESULTS.md is a record
of past runs and is left out). An untagged block that starts with a command is an error: tag it so
it is checked. Each line (continuations joined, comments dropped, split at && ; | and ||) is one
command, launchers (mpirun, srun, torchrun, bash) stripped:

  zero ...         runs for real when short (--help, --version, env, flags, config, estimate,
                   train --dry_run) and every file it names exists; otherwise with
                   ZERO_PARSE_ONLY=1, which stops the command once its words are parsed and
                   checked (unknown flags, bad values, missing arguments fail it).
  scripts/X.sh     must exist and pass `bash -n`; runs for real when in SHORT_SCRIPTS (and what it
                   needs is here), otherwise with ZERO_PARSE_ONLY=1 (each script stops once its arguments are checked;
                   scripts/demo.sh hands its whole `zero train` command line to the parse).
  cmake, ninja     options checked against what they accept here; -DNAME must be a cache variable
                   of BUILD_DIR (or CMAKE_*), a --target or ninja target one of its targets.
  ctest            its -L/-R selection must name at least one test of BUILD_DIR.
  build/...        a program of the build: its name must be a target.
  sbatch FILE      the file must exist.
  anything else    shell syntax only (`bash -n`), and the ./paths it names must exist.

<PLACEHOLDER>, DIR-like capitals and "..." mark a command as an example to adapt: it is parsed,
not run. Commands run in a scratch folder that mirrors the checkout (build/ mirrors BUILD_DIR), so
what they write lands there. Prints one line per command (ran / parsed / listed / checked /
syntax) and exits 1 listing the failures.
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

SHELL_TAGS = {"sh", "bash", "shell", "console"}
DOC_PATTERNS = ["README.md", "docs/*.md", "examples/README.md", "bindings/README.md",
                "model/*/README.md"]
# Scripts short enough to run for real: why, and what they need (parsed only without it).
SHORT_SCRIPTS = {
    "scripts/fortunes_classification_data.sh": (
        "writes three CSV files from the fortunes corpus in a second", "/usr/share/games/fortunes"),
    "scripts/make_llama_folder.sh": (
        "learns a 2048-token BPE on the fortunes corpus in seconds", "/usr/share/games/fortunes"),
}
# Why the other scripts are only parsed.
SCRIPT_REASONS = {
    "scripts/demo.sh": "installs, builds and trains for minutes",
    "scripts/test.sh": "installs, builds and runs every test",
    "scripts/setup.sh": "installs Debian packages",
    "scripts/build.sh": "builds for minutes",
    "scripts/gpu_check.sh": "needs a GPU (or builds for minutes)",
    "scripts/classify_demo.sh": "trains for half a minute on 2 ranks",
    "scripts/sanitize.sh": "builds the sanitizer builds",
}
ZERO_SHORT_SUBCOMMANDS = {"env", "flags", "config", "estimate"}
OUTPUT_FLAGS = {"--output_dir", "--logging_dir", "--cache_dir", "--output"}
# Programs of the build short enough to run for real (alone, even where the docs launch them).
SHORT_PROGRAMS = {"mlp_engine": "under a second", "engine_from_config": "under a second"}
RUN_TIMEOUT_S = 120
CMAKE = os.environ.get("ZERO_CMAKE", "cmake")  # ctest passes its own
CTEST = os.environ.get("ZERO_CTEST", "ctest")
COMMAND_WORDS = re.compile(r"^(\$ )?(zero|mpirun|mpiexec|srun|torchrun|cmake|ninja|ctest|bash|sbatch|"
                           r"python3?|(\./)?(scripts|build|configs)/\S+)( |$)")
PLACEHOLDER = "PLACEHOLDER"


class Failure(Exception):
    pass


def doc_files(source):
    files = []
    for pattern in DOC_PATTERNS:
        files += sorted(glob.glob(os.path.join(source, pattern)))
    return [os.path.relpath(f, source) for f in files]


def command_blocks(source, doc):
    """Yields (line number, tag, lines) of each fenced block of `doc`."""
    lines = open(os.path.join(source, doc), encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```\s*([\w+-]*)", lines[i])
        if not fence:
            i += 1
            continue
        indent, tag = len(fence.group(1)), fence.group(2)
        end = i + 1
        while end < len(lines) and not re.match(r"^\s*```\s*$", lines[end]):
            end += 1
        yield i + 1, tag, [line[indent:] for line in lines[i + 1:end]]
        i = end + 1


def command_lines(tag, lines, first_line):
    """Yields (line number, text) of each command: continuations joined, console prompts kept."""
    pending, start = "", None
    for offset, line in enumerate(lines):
        if tag == "console":
            if not pending and not line.startswith("$ "):
                continue
            if not pending:
                line = line[2:]
        if start is None:
            start = first_line + 1 + offset
        stripped = line.rstrip()
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        text, pending = pending + stripped, ""
        if text.strip() and not text.strip().startswith("#"):
            yield start, text
        start = None


def words_of(text):
    """The command line's words and operators, with <placeholders> and [optional] marks resolved."""
    text = re.sub(r"<[^<>]*>", PLACEHOLDER, text)
    text = re.sub(r"(^|\s)\[(-[^\[\]]*)\]", r"\1\2", text)
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def split_commands(words):
    commands, current = [], []
    for word in words:
        if word in ("&&", "||", ";", "|", "&"):
            if current:
                commands.append(current)
            current = []
        else:
            current.append(word)
    if current:
        commands.append(current)
    return commands


# Launcher options that take a value (the rest are flags, or --name=value).
LAUNCHER_VALUE_OPTIONS = {
    "mpirun": {"-np", "-n", "-c", "-N", "--map-by", "--bind-to", "-x", "-H", "--host",
               "--hostfile", "--npernode"},
    "srun": {"-N", "-n", "-c", "-p", "-A", "-t", "--nodes", "--ntasks", "--ntasks-per-node",
             "--cpus-per-task", "--signal"},
    "torchrun": None,  # every option takes a value but the flags below
}
TORCHRUN_FLAGS = {"--no_python", "--no-python", "--standalone", "-m", "--module"}


def strip_launcher(words):
    """(launcher or None, the launched command's words)."""
    launcher = None
    while words:
        name = os.path.basename(words[0])
        if name in ("mpirun", "mpiexec", "srun", "torchrun"):
            launcher = "mpirun" if name == "mpiexec" else name
            i = 1
            while i < len(words) and words[i].startswith("-"):
                option = words[i]
                takes_value = (option not in TORCHRUN_FLAGS if launcher == "torchrun"
                               else option in LAUNCHER_VALUE_OPTIONS[launcher])
                i += 2 if takes_value and "=" not in option else 1
            words = words[i:]
        elif name == "bash" and len(words) > 1 and not words[1].startswith("-"):
            words = words[1:]
        else:
            break
    return launcher, words


class Checker:
    def __init__(self, source, build):
        self.source, self.build = os.path.abspath(source), os.path.abspath(build)
        self.failures, self.counts = [], {}
        self.scratch = tempfile.mkdtemp(prefix="zero_doc_commands_")
        for entry in os.listdir(self.source):
            if entry not in ("build", ".git"):
                os.symlink(os.path.join(self.source, entry), os.path.join(self.scratch, entry))
        scratch_build = os.path.join(self.scratch, "build")
        os.mkdir(scratch_build)
        for entry in os.listdir(self.build):
            os.symlink(os.path.join(self.build, entry), os.path.join(scratch_build, entry))
        self.zero = os.path.join(self.build, "tools", "zero")
        self.cache = self.cache_variables()
        self.targets = self.build_targets()

    def cache_variables(self):
        names = set()
        with open(os.path.join(self.build, "CMakeCache.txt"), encoding="utf-8") as cache:
            for line in cache:
                match = re.match(r"^([A-Za-z_][\w-]*):", line)
                if match:
                    names.add(match.group(1))
        return names

    def build_targets(self):
        if os.path.isfile(os.path.join(self.build, "build.ninja")):  # read-only, unlike a build
            out = subprocess.run(["ninja", "-C", self.build, "-t", "targets", "all"],
                                 capture_output=True, text=True, check=True).stdout
            return set(re.findall(r"^([\w.+/-]+): ", out, re.M))
        out = subprocess.run([CMAKE, "--build", self.build, "--target", "help"],
                             capture_output=True, text=True, check=True).stdout
        return set(re.findall(r"^\.\.\. ([\w.+-]+)", out, re.M))

    def report(self, where, kind, text, note=""):
        self.counts[kind] = self.counts.get(kind, 0) + 1
        print(f"{kind:8} {where}: {text}" + (f"  ({note})" if note else ""))

    def run(self, argv, cwd, env=None, timeout=RUN_TIMEOUT_S):
        full_env = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
        for name in list(full_env):  # run alone, whatever launch the checker itself is under
            if name.startswith(("OMPI_", "PMIX_", "SLURM_")) or name in ("RANK", "WORLD_SIZE"):
                del full_env[name]
        try:
            done = subprocess.run(argv, cwd=cwd, env=full_env, capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise Failure(f"did not finish in {timeout} s")
        except OSError as error:
            raise Failure(str(error))
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().split("\n")[-6:])
            raise Failure(f"exit {done.returncode}:\n{tail}")
        return done.stdout

    def path_in_scratch(self, path, cwd):
        path = os.path.expanduser(path)
        return path if os.path.isabs(path) else os.path.normpath(os.path.join(cwd, path))

    def check_cmake_definitions(self, words):
        for word in words:
            match = re.match(r"^-D([A-Za-z_]\w*)(:\w+)?=", word)
            if match and not (match.group(1) in self.cache or match.group(1).startswith("CMAKE_")):
                raise Failure(f"{word}: no cache variable {match.group(1)} in {self.build}")

    def check_zero(self, where, text, words, cwd, env, launcher):
        example = [w for w in words if w == PLACEHOLDER or w == "..." or re.fullmatch(r"[A-Z]{2,}", w)]
        words = [w for w in words if w != "..."]
        argv = [self.zero] + words[1:]
        subcommand = words[1] if len(words) > 1 else ""
        short = (any(w in ("--help", "-h", "--version") for w in words) or
                 subcommand in ZERO_SHORT_SUBCOMMANDS or
                 (subcommand == "train" and "--dry_run" in words))
        missing = [w for i, w in enumerate(words[2:], 2)
                   if not w.startswith("-") and words[i - 1] not in OUTPUT_FLAGS and
                   re.search(r"\.(json|txt|csv)$|/", w) and
                   not os.path.exists(self.path_in_scratch(w, cwd))]
        notes = [f"alone, not under {launcher}" if launcher else "",
                 f"the build's zero as {words[0]}" if words[0] != "zero" else ""]
        if short and not example and not missing:
            self.run(argv, cwd, env)
            self.report(where, "ran", text, "; ".join(n for n in notes if n))
            return
        out = self.run(argv, cwd, dict(env, ZERO_PARSE_ONLY="1"))
        if "the command line parses" not in out:
            raise Failure("ZERO_PARSE_ONLY=1 did not stop it after parsing: " + out.strip()[:200])
        why = ("an example to adapt: " + " ".join(sorted(set(example))) if example else
               "reads " + ", ".join(missing) + ", which a run writes or the user supplies"
               if missing else "trains, or needs what a run writes")
        self.report(where, "parsed", text, why)

    def check_script(self, where, text, words, cwd, env):
        script = os.path.normpath(words[0])
        path = self.path_in_scratch(script, cwd)
        if not os.path.isfile(path):
            raise Failure(f"no such script {script}")
        self.run(["bash", "-n", path], cwd)
        self.check_cmake_definitions(words[1:])
        relative = os.path.relpath(os.path.realpath(path), self.source)
        why, needs = SHORT_SCRIPTS.get(relative, (None, None))
        if why and os.path.exists(needs):
            self.run(["bash", path] + words[1:], cwd, env)
            self.report(where, "ran", text, why)
            return
        out = self.run(["bash", path] + words[1:], cwd,
                       dict(env, ZERO_PARSE_ONLY="1", ZERO_BUILD_DIR=os.path.join(self.scratch, "build")))
        if "the command line parses" not in out:
            raise Failure(f"{relative} has no ZERO_PARSE_ONLY=1 mode (stop once the arguments are "
                          f"checked, printing 'the command line parses')")
        self.report(where, "parsed", text,
                    f"needs {needs}, absent here" if why else SCRIPT_REASONS.get(relative, "long"))

    def check_cmake(self, where, text, words, cwd):
        i, mode = 1, "configure"
        value_options = {"-S", "-B", "-G", "--target", "-t", "-j", "--parallel", "--prefix",
                         "--config", "--component"}
        while i < len(words):
            word = words[i]
            if word in ("--build", "--install"):
                mode = word[2:]
                i += 2
            elif word in value_options:
                if i + 1 >= len(words):
                    raise Failure(f"{word} needs a value")
                if word == "-S" and not os.path.isfile(
                        os.path.join(self.path_in_scratch(words[i + 1], cwd), "CMakeLists.txt")):
                    raise Failure(f"-S {words[i + 1]}: no CMakeLists.txt there")
                if word in ("--target", "-t") and words[i + 1] not in self.targets:
                    raise Failure(f"--target {words[i + 1]}: not a target of the build")
                i += 2
            elif re.match(r"^-D\w", word) or word in ("--fresh", "-N", "--strip"):
                i += 1
            else:
                raise Failure(f"cmake option {word} is not one this checker knows")
        self.check_cmake_definitions(words)
        self.report(where, "checked", text, f"cmake {mode}: options and names checked, not run")

    def check_ninja(self, where, text, words):
        targets = [w for i, w in enumerate(words[1:], 1) if not w.startswith("-") and words[i - 1] != "-C"]
        unknown = [t for t in targets if t not in self.targets]
        if unknown:
            raise Failure("not a target of the build: " + " ".join(unknown))
        self.report(where, "checked", text, "targets exist; not built here")

    def check_ctest(self, where, text, words):
        selection = [w for w in words[1:] if w not in ("--output-on-failure",)]
        for option in ("--test-dir",):
            if option in selection:
                at = selection.index(option)
                del selection[at:at + 2]
        out = self.run([CTEST, "--test-dir", self.build, "-N"] + selection, self.build)
        total = re.search(r"Total Tests: (\d+)", out)
        if not total or int(total.group(1)) == 0:
            raise Failure("selects no test")
        self.report(where, "listed", text, f"selects {total.group(1)} tests; not run here")

    def check_command(self, where, text, words, cwd):
        env = {}
        while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
            name, value = words[0].split("=", 1)
            env[name] = value
            words = words[1:]
        launcher, words = strip_launcher(words)
        if not words:
            raise Failure("a launcher without a command")
        program = words[0]
        if program == "cd":
            target = self.path_in_scratch(words[1], cwd)
            if not os.path.isdir(target):
                raise Failure(f"cd {words[1]}: no such folder")
            return target
        if program == "zero" or re.match(r"^(\./)?build/tools/zero$", program) or program.endswith("/bin/zero"):
            self.check_zero(where, text, words, cwd, env, launcher)
        elif re.match(r"^(\./)?scripts/", program) or program.endswith(".sh"):
            self.check_script(where, text, words, cwd, env)
        elif program == "cmake":
            self.check_cmake(where, text, words, cwd)
        elif program == "ninja":
            self.check_ninja(where, text, words)
        elif program == "ctest":
            self.check_ctest(where, text, words)
        elif re.match(r"^(\./)?build/", program):
            name = os.path.basename(program)
            if name not in self.targets:
                raise Failure(f"{program}: no target {name} in the build")
            if name in SHORT_PROGRAMS:
                self.run([self.path_in_scratch(program, cwd)] + words[1:], cwd, env)
                self.report(where, "ran", text, SHORT_PROGRAMS[name] +
                            (f"; alone, not under {launcher}" if launcher else ""))
            else:
                self.report(where, "checked", text, "a program of the build; its test runs it")
        elif program == "sbatch":
            if not os.path.isfile(self.path_in_scratch(words[-1], cwd)):
                raise Failure(f"no such batch script {words[-1]}")
            self.report(where, "checked", text, "needs a Slurm cluster: the file exists")
        else:
            missing = [w for w in words if w.startswith("./") and
                       not os.path.exists(self.path_in_scratch(w, cwd))]
            if missing:
                raise Failure("no such path: " + " ".join(missing))
            self.report(where, "syntax", text, "not a zero, scripts/ or cmake command")
        return cwd

    def check_block(self, doc, first_line, tag, lines):
        script = "\n".join(lines)
        syntax = subprocess.run(["bash", "-n"], input=script if tag != "console" else "",
                                capture_output=True, text=True)
        if syntax.returncode != 0:
            self.fail(f"{doc}:{first_line}", "the block", syntax.stderr.strip())
        cwd = self.scratch
        for line_number, text in command_lines(tag, lines, first_line):
            where = f"{doc}:{line_number}"
            try:
                commands = split_commands(words_of(text))
            except ValueError as error:
                self.fail(where, text.strip(), str(error))
                continue
            for words in commands:
                shown = shlex.join(words)
                shown = shown if len(shown) <= 90 else shown[:87] + "..."
                try:
                    cwd = self.check_command(where, shown, words, cwd)
                except Failure as error:
                    self.fail(where, shown, str(error))

    def fail(self, where, text, why):
        self.failures.append(f"{where}: {text}\n    " + why.replace("\n", "\n    "))
        self.report(where, "FAILED", text)

    def check(self):
        for doc in doc_files(self.source):
            for first_line, tag, lines in command_blocks(self.source, doc):
                first = next((line for line in lines if line.strip()), "")
                if tag in SHELL_TAGS:
                    self.check_block(doc, first_line, tag, lines)
                elif tag == "" and COMMAND_WORDS.match(first.strip()):
                    self.fail(f"{doc}:{first_line}", first.strip(),
                              "an untagged block of commands: tag it ```sh so that it is checked")
        shutil.rmtree(self.scratch, ignore_errors=True)
        summary = ", ".join(f"{n} {kind}" for kind, n in sorted(self.counts.items()))
        if self.failures:
            print(f"\n{len(self.failures)} command(s) of the docs fail:\n" + "\n".join(self.failures))
            return 1
        print(f"\nevery command of the docs checked: {summary}")
        return 0


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    return Checker(sys.argv[1], sys.argv[2]).check()


if __name__ == "__main__":
    sys.exit(main())
