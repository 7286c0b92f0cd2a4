#!/usr/bin/env python3
"""readme_commands.py - the README's commands and what runs them, kept in step.

    readme_commands.py [--root DIR] check        every rule below; exit 1 naming each break
    readme_commands.py [--root DIR] show NAME    print the README's command NAME (cpu-setup,
                                                 tests, gpu-setup), as tests/fresh/ runs it
    readme_commands.py [--root DIR] --self-test  plant one break of each kind in copies of
                                                 the files; each must be named
    --build DIR (before the command): also check the docs' test names against DIR's ctest list

The README marks its commands with `<!-- readme-command: NAME -->` before the
code block. The rules:
  - its CPU install list is .ci/run's PKGS (CI_PKGS: what only CI adds);
  - .ci/run configures, builds and tests `build` with the README's commands
    (configure: plus only -DTB_WERROR=ON and the nvJPEG root);
  - the GPU command is launch/install_gpu.sh, the README's configure and
    build commands, and launch/local.sh;
  - the wheel table lists exactly launch/cuda-wheels.txt's pins, and the NCCL
    of the apt alternative is the wheels' NCCL;
  - launch/container/build.sh runs install_gpu.sh and the README's configure
    and build commands, and both container recipes run build.sh.
and, over README.md and docs/*.md:
  - every relative link leads to a file or folder that exists, and so does
    every repository path in backticks (`src/feed/batch_upload.c`: a path
    under one of the repository's top folders, or a room of src/; globs and
    PREFIX_ names are not paths);
  - every figure with a decimal point in the README's "Measured figures" table
    is in a file its row links to (a link to a file inside a folder named as
    `folder/`: any file of that folder);
  - a script the pages run by its path (the first word of a command, with an
    argument after it) is executable and starts with #!;
  - with --build DIR, a `snake_case` name in backticks is a word of the code
    (src, model, data, comm, core, tests, bench, launch, cmake), a ctest of
    the build (the add_test lines under DIR) or a name from outside
    (OUTSIDE_NAMES), so a renamed test or attribute is not left in the docs;
  - with --build DIR, every flag that a subcommand's --help lists
    (DIR/trainbench SUB --help) is named somewhere in the pages.
Standard library only.
"""
import glob
import os
import re
import shlex
import subprocess
import sys

FILES = {
    "readme": "README.md",
    "ci": ".ci/run",
    "wheels": "launch/cuda-wheels.txt",
    "build_sh": "launch/container/build.sh",
    "dockerfile": "launch/container/Dockerfile",
    "apptainer": "launch/container/trainbench.def",
    "cmake": "CMakeLists.txt",
}
CI_CONFIGURE_EXTRAS = {"-DTB_WERROR=ON", "$nvjpeg_arg"}
CODE_DIRS = ("src", "model", "data", "comm", "core", "tests", "bench", "launch", "cmake", ".ci")
# names in backticks that come from elsewhere: perftest and rdma-core tools and fields, and the
# style examples docs/DESIGN.md quotes from the design card
OUTSIDE_NAMES = {"active_mtu", "ib_write_bw", "ibv_devinfo", "loader_next_batch", "comm_allreduce_grads"}


def readme_commands(text):
    """{name: command} from each `<!-- readme-command: NAME -->` + ```sh block."""
    out = {}
    for m in re.finditer(r"<!-- readme-command: ([a-z0-9-]+) -->\s*```sh\n(.*?)```", text, re.S):
        out[m.group(1)] = " ".join(m.group(2).split())
    return out


def norm(cmd):
    """Whitespace-normalised, with `-j "$(nproc)"` and `-j"$(nproc)"` alike."""
    return re.sub(r'-j\s+"', '-j"', " ".join(cmd.split()))


def split_and(cmd):
    return [norm(c) for c in cmd.split("&&")]


def shell_var(text, name):
    m = re.search(r"^%s=\"(.*?)\"" % name, text, re.S | re.M)
    return m.group(1).replace("\\\n", " ").split() if m else None


def ci_line(text, pattern):
    """The first line of .ci/run matching pattern (a regex), normalised."""
    for line in text.splitlines():
        if re.match(pattern, line.strip()):
            return norm(line)
    return None


def wheel_pins(text):
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, ver = line.partition("==")
            pins[name.strip()] = ver.strip()
    return pins


def readme_wheel_table(text):
    """{package: version} from the README's wheel table rows (first column names,
    second column versions, comma-separated, in the same order; 'nvidia-cuda-nvcc, -crt'
    abbreviates nvidia-cuda-crt)."""
    got = {}
    for m in re.finditer(r"^\| (nvidia-[^|]+)\| ([0-9][^|]*)\|", text, re.M):
        names = [n.strip() for n in m.group(1).split(",")]
        vers = [v.strip() for v in m.group(2).split(",")]
        full = []
        for n in names:
            if n.startswith("-"):
                n = full[-1].rsplit("-", 1)[0] + n
            full.append(n)
        if len(full) != len(vers):
            got["(row '%s')" % m.group(1).strip()] = "names and versions do not pair up"
            continue
        got.update(zip(full, vers))
    return got


def check(f):
    err = []
    cmds = readme_commands(f["readme"])
    for name in ("cpu-setup", "tests", "gpu-setup"):
        if name not in cmds:
            err.append("README: no command marked '<!-- readme-command: %s -->' before a ```sh block" % name)
    if err:
        return err
    cpu = split_and(cmds["cpu-setup"])
    install = [c for c in cpu if "apt-get install" in c]
    configure = [c for c in cpu if c.startswith("cmake -S")]
    build = [c for c in cpu if c.startswith("cmake --build")]
    if not (install and configure and build):
        return ["README cpu-setup: expected apt-get install, cmake -S and cmake --build steps, got: %s" % cpu]
    readme_pkgs = install[0].split("install", 1)[1].split()
    readme_pkgs = [p for p in readme_pkgs if not p.startswith("-")]
    configure, build = configure[0], build[0]

    # .ci/run: packages, configure, build, test
    ci = f["ci"]
    pkgs = shell_var(ci, "PKGS")
    if pkgs is None:
        err.append(".ci/run: no PKGS=\"...\" (the README's package list)")
    elif set(pkgs) != set(readme_pkgs):
        err.append("package lists differ: only in the README: %s; only in .ci/run's PKGS: %s" % (
            sorted(set(readme_pkgs) - set(pkgs)) or "-", sorted(set(pkgs) - set(readme_pkgs)) or "-"))
    ci_conf = ci_line(ci, r"cmake -S \. -B build ")
    if ci_conf is None:
        err.append(".ci/run: no 'cmake -S . -B build' line")
    else:
        rt, ct = shlex.split(configure, posix=False), shlex.split(ci_conf, posix=False)
        extra = [t for t in ct if t not in rt]
        if ct[:len(rt)] != rt or set(extra) - CI_CONFIGURE_EXTRAS:
            err.append("configure differs: README '%s', .ci/run '%s' (CI may add only %s)" % (
                configure, ci_conf, " ".join(sorted(CI_CONFIGURE_EXTRAS))))
    ci_build = ci_line(ci, r"cmake --build build ")
    if ci_build != build:
        err.append("build command differs: README '%s', .ci/run '%s'" % (build, ci_build))
    tests = [norm(c) for c in cmds["tests"].split(";")]
    ci_ctest = ci_line(ci, r"ctest --test-dir build ")
    if ci_ctest is None or norm(ci_ctest.split("||")[0]) != tests[0]:
        err.append("test command differs: README '%s', .ci/run '%s'" % (tests[0], ci_ctest))
    if len(tests) < 2 or not tests[1].startswith("sh tests/skip_reasons.sh build"):
        err.append("README tests: not followed by 'sh tests/skip_reasons.sh build $?'")
    if ci_line(ci, r"sh tests/skip_reasons\.sh build ") is None:
        err.append(".ci/run: does not run 'sh tests/skip_reasons.sh build' after the suite")

    # the GPU command
    gpu = split_and(cmds["gpu-setup"])
    want = ["sh launch/install_gpu.sh", configure, build, "launch/local.sh -- ./build/trainbench"]
    if gpu != want:
        err.append("README gpu-setup is '%s', expected '%s'" % (" && ".join(gpu), " && ".join(want)))

    # the wheels
    pins = wheel_pins(f["wheels"])
    table = readme_wheel_table(f["readme"])
    for name, ver in pins.items():
        if table.get(name) != ver:
            err.append("wheel %s: launch/cuda-wheels.txt pins %s, the README's table says %s" % (
                name, ver, table.get(name, "nothing")))
    for name in set(table) - set(pins):
        err.append("wheel %s: in the README's table (%s) but not pinned in launch/cuda-wheels.txt" % (
            name, table[name]))
    nccl = pins.get("nvidia-nccl-cu13")
    for v in re.findall(r"libnccl2=([0-9.]+)-", f["readme"]):
        if v != nccl:
            err.append("the apt alternative installs NCCL %s, the wheels pin %s" % (v, nccl))

    # the containers
    bs = [norm(l) for l in f["build_sh"].splitlines()]
    for want_line, what in ((("sh launch/install_gpu.sh",), "launch/install_gpu.sh"),
                            ((configure,), "the README's configure command")):
        if not any(l == want_line[0] for l in bs):
            err.append("launch/container/build.sh does not run %s ('%s')" % (what, want_line[0]))
    if not any(l.startswith(build) for l in bs):
        err.append("launch/container/build.sh does not run the README's build command ('%s')" % build)
    for key in ("dockerfile", "apptainer"):
        code = [l for l in f[key].replace("\\\n", " ").splitlines() if not l.lstrip().startswith("#")]
        if not any(re.search(r"\bsh \S*launch/container/build\.sh", l) for l in code):
            err.append("%s does not run launch/container/build.sh" % FILES[key])
    # every source folder the top CMakeLists.txt adds goes into both images
    dirs = re.findall(r"^\s*add_subdirectory\((\w+)\)", f["cmake"], re.M)
    copied = {"dockerfile": set(re.findall(r"^COPY (\S+) ", f["dockerfile"], re.M)),
              "apptainer": set(re.findall(r"^\s+(\S+) /opt/trainbench/\s*$", f["apptainer"], re.M))}
    for key, have in copied.items():
        for d in dirs:
            if d not in have:
                err.append("%s does not copy %s/, which CMakeLists.txt builds (add_subdirectory(%s))" % (
                    FILES[key], d, d))
    return err


def doc_links(page, text, root):
    """Relative markdown links of a page that lead nowhere."""
    err = []
    for m in re.finditer(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):
            continue
        if not os.path.exists(os.path.join(root, os.path.dirname(page), target)):
            err.append("%s: link to %s, which does not exist" % (page, target))
    return err


def doc_paths(page, text, root):
    """Repository paths in backticks (first folder one of the repository's) that do not exist."""
    err, tops = [], {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))}
    for m in re.finditer(r"`((?:\./)?([\w.-]+)/[\w./-]*\w)`", text):
        path, top = m.group(1), m.group(2)
        if top in tops and top not in ("build", ".git") and not re.search(r"[A-Z]{3,}", path) \
                and not any(os.path.exists(os.path.join(root, d, path)) for d in ("", "src")):  # rooms: src/X
            err.append("%s names %s, which does not exist" % (page, path))
    return sorted(set(err))


def figures(text, root):
    """Decimal figures of the README's Measured figures table missing from the files the row links."""
    err = []
    sec = text.split("## Measured figures", 1)[-1].split("\n## ", 1)[0]
    for row in re.findall(r"^\|(.+)\|\s*$", sec, re.M):
        cells = [c.strip() for c in row.split("|")]
        if len(cells) < 3 or not re.search(r"\]\(", cells[1]):
            continue
        texts = []
        for name, target in re.findall(r"\[([^\]]+)\]\(([^)]+)\)", cells[1]):
            path = os.path.join(root, target)
            if not os.path.isfile(path):
                err.append("Measured figures: %s is not a file" % target)
                continue
            paths = [path]
            if name.endswith("/"):
                paths = glob.glob(os.path.join(root, name.strip("`"), "**", "*.md"), recursive=True)
            for p in paths:
                with open(p, errors="replace") as fh:
                    texts.append(fh.read())
        for fig in re.findall(r"(?<![\w.])\d+\.\d+(?!\.?\d)", cells[2]):
            if texts and not any(re.search(r"(?<![\d.])%s(?![\d])" % re.escape(fig), t) for t in texts):
                err.append("Measured figures: %s (row '%s') is in none of %s" % (
                    fig, cells[0][:50], ", ".join(re.findall(r"\]\(([^)]+)\)", cells[1]))))
    return err


def doc_commands(text):
    """Command lines of a page: fenced and indented code lines, and backticked spans."""
    out, prose, fence = [], [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fence = not fence
        elif fence or line.startswith("    "):
            out.append(line.strip())
        else:
            prose.append(line)
    return out + [" ".join(c.split()) for c in re.findall(r"`([^`]+)`", "\n".join(prose))]


def scripts_run(page, text, f):
    """Scripts a page runs by their path that are not executable or have no #! line."""
    err = []
    for cmd in doc_commands(text):
        words = cmd.split()
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            words = words[1:]
        if len(words) < 2 or not re.search(r"\.(py|sh|sbatch)$", words[0]):
            continue
        script = words[0][2:] if words[0].startswith("./") else words[0]
        if script in f["scripts"] and script not in f["runnable"] and not any(script in e for e in err):
            err.append("%s runs %s by its path, but it is not executable with a #! line (chmod +x, "
                       "or show it as 'python3 %s')" % (page, script, script))
    return err


def code_words(root):
    """Every word of the code: file names and identifiers of CODE_DIRS and CMakeLists.txt."""
    words = set()
    paths = [os.path.join(root, "CMakeLists.txt")]
    for d in CODE_DIRS:
        for base, dirs, files in os.walk(os.path.join(root, d)):
            dirs[:] = [x for x in dirs if x not in ("corpus", "crashes", "__pycache__")]
            paths += [os.path.join(base, x) for x in files if x != "readme_commands.py"]  # not its plants
    for p in paths:
        words.update(re.findall(r"\w+", os.path.basename(p)))
        if os.path.getsize(p) < 2000000:
            with open(p, errors="replace") as fh:
                words.update(re.findall(r"\w+", fh.read()))
    return words


def check_docs(f, root, ctests):
    """The rules over README.md and docs/*.md (module docstring); ctests: the build's tests or None."""
    err = figures(f["readme"], root)
    for page, text in [("README.md", f["readme"])] + sorted(f["pages"].items()):
        err += doc_links(page, text, root)
        err += doc_paths(page, text, root)
        err += scripts_run(page, text, f)
        for name in sorted(set(re.findall(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`", text))):
            if ctests is not None and name not in f["code_words"] | OUTSIDE_NAMES | ctests:
                err.append("%s names `%s`, which is no word of the code and no ctest of the build" % (page, name))
    return err


def load_docs(f, root):
    """README.md and docs/*.md, the repository's scripts and which of them run by their path."""
    f["pages"] = {}
    for p in sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
        with open(p) as fh:
            f["pages"]["docs/" + os.path.basename(p)] = fh.read()
    f["scripts"], f["runnable"] = set(), set()
    for d in CODE_DIRS + ("",):
        for p in glob.glob(os.path.join(root, d, "**", "*.*"), recursive=True):
            if re.search(r"\.(py|sh|sbatch)$", p) and os.path.isfile(p):
                rel = os.path.relpath(p, root)
                f["scripts"].add(rel)
                with open(p, "rb") as fh:
                    if os.access(p, os.X_OK) and fh.read(2) == b"#!":
                        f["runnable"].add(rel)
    f["code_words"] = code_words(root)


SUBCOMMANDS = ("train", "step", "mkdata", "loader-bench", "loader-bench --feed", "allreduce-bench", "preflight",
               "probe", "report", "project")


def help_flags(build):
    """{subcommand: [--flag, ...]} from the build's trainbench SUB --help, or None without a build."""
    if not build:
        return None
    out = {}
    for sub in SUBCOMMANDS:
        p = subprocess.run([os.path.join(build, "trainbench")] + sub.split() + ["--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        out[sub] = re.findall(r"^  (?:-\w, )?(--[a-z][a-z0-9-]*)", p.stdout, re.M)
    return out


def undocumented_flags(f, flags):
    """Flags of the subcommands' --help that no page names."""
    text = f["readme"] + "".join(f["pages"].values())
    return ["trainbench %s --help lists %s, which no page of README.md and docs/ names" % (sub, fl)
            for sub, fls in sorted(flags.items()) for fl in fls
            if fl != "--help" and not re.search(re.escape(fl) + r"(?![\w-])", text)]


def ctest_names(build):
    """The tests of a build directory (the add_test lines of its CTestTestfile.cmake files), or None
    without one. Not `ctest -N`: that rewrites Testing/Temporary/LastTest.log, which
    tests/skip_reasons.sh reads after the suite."""
    if not build:
        return None
    names = set()
    for p in glob.glob(os.path.join(build, "**", "CTestTestfile.cmake"), recursive=True):
        with open(p) as fh:
            names.update(re.findall(r"^add_test\(\[=\[(.+?)\]=\]", fh.read(), re.M))
    return names


def plants(f, ctests):
    """(what, expected words in an error, modified files) for --self-test."""
    def mod(key, old, new):
        g = dict(f)
        if old not in g[key]:
            raise SystemExit("self-test: '%s' not found in %s: update the plants" % (old, FILES[key]))
        g[key] = g[key].replace(old, new, 1)
        return g
    return [
        ("README drops a package", "package lists differ", mod("readme", " hdf5-tools ", " ")),
        (".ci/run adds a package to PKGS", "package lists differ", mod("ci", "PKGS=\"build-essential", "PKGS=\"ccache build-essential")),
        (".ci/run configures with another flag", "configure differs",
         mod("ci", "-DTB_WERROR=ON $nvjpeg_arg", "-DTB_WERROR=ON -DTB_NATIVE=ON $nvjpeg_arg")),
        ("README's test command loses -j", "test command differs",
         mod("readme", 'ctest --test-dir build -j"$(nproc)" --output-on-failure;', "ctest --test-dir build --output-on-failure;")),
        ("a wheel pin moves", "wheel nvidia-cudnn-cu13", mod("wheels", "nvidia-cudnn-cu13==9.19.0.56", "nvidia-cudnn-cu13==9.20.0.48")),
        ("the GPU command builds differently", "gpu-setup",
         mod("readme", "sh launch/install_gpu.sh && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release",
             "sh launch/install_gpu.sh && cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug")),
        ("build.sh skips install_gpu.sh", "does not run launch/install_gpu.sh",
         mod("build_sh", "sh launch/install_gpu.sh\n", "\n")),
        ("the Dockerfile builds on its own", "Dockerfile does not run",
         mod("dockerfile", "    sh launch/container/build.sh", "    true")),
        ("the Apptainer recipe builds on its own", "trainbench.def does not run",
         mod("apptainer", "sh /opt/trainbench/launch/container/build.sh", "true")),
        ("the Dockerfile leaves out a source folder", "does not copy core/", mod("dockerfile", "COPY core core\n", "")),
        ("the Apptainer recipe leaves out a source folder", "does not copy core/",
         mod("apptainer", "    core /opt/trainbench/\n", "")),
        ("the apt alternative's NCCL moves", "the apt alternative installs NCCL 2.29.2",
         mod("readme", "libnccl2=2.28.9-1+cuda13.0", "libnccl2=2.29.2-1+cuda13.0")),
        ("a README link leads nowhere", "link to docs/testin.md",
         mod("readme", "(docs/testing.md)", "(docs/testin.md)")),
        ("a docs page links a renamed file", "docs/training.md: link to cud.md",
         page(f, "docs/training.md", "[cuda.md](cuda.md)", "[cuda.md](cud.md)")),
        ("a page names a file that moved", "docs/data.md names src/feed/batch_uploads.c",
         page(f, "docs/data.md", "`src/feed/batch_upload.c`", "`src/feed/batch_uploads.c`")),
        ("a measured figure moves", "7112.42 (row", mod("readme", "bf16 7112.24 img/s", "bf16 7112.42 img/s")),
        ("a run-by-path script loses its x bit", "runs model/convert_torchvision.py by its path",
         dict(f, runnable=f["runnable"] - {"model/convert_torchvision.py"})),
    ] + ([] if ctests is None else [  # the names need the build's ctest list (--build)
        ("a test or attribute renamed under the docs", "names `resilience_killd`",
         page(f, "docs/training.md", "(`resilience_killed`,", "(`resilience_killd`,")),
        ("a flag of --help no page names", "trainbench train --help lists --synthetic-size",
         page(f, "docs/training.md", "`--synthetic-size`", "`--synthetic-samples`")),
    ])


def page(f, name, old, new):
    """f with one docs page changed (for --self-test)."""
    if old not in f["pages"][name]:
        raise SystemExit("self-test: '%s' not found in %s: update the plants" % (old, name))
    return dict(f, pages=dict(f["pages"], **{name: f["pages"][name].replace(old, new, 1)}))


def main():
    args = sys.argv[1:]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    build = None
    while args[:1] in (["--root"], ["--build"]):
        if args[0] == "--root":
            root = args[1]
        else:
            build = args[1]
        args = args[2:]
    f = {}
    for key, rel in FILES.items():
        with open(os.path.join(root, rel)) as fh:
            f[key] = fh.read()
    if args[:1] == ["show"] and len(args) == 2:
        cmds = readme_commands(f["readme"])
        if args[1] not in cmds:
            sys.exit("README has no command '%s' (it has: %s)" % (args[1], ", ".join(sorted(cmds))))
        print(cmds[args[1]])
        return 0
    load_docs(f, root)
    ctests, flags = ctest_names(build), help_flags(build)
    docs = lambda g: check_docs(g, root, ctests) + (undocumented_flags(g, flags) if flags else [])
    if args == ["check"]:
        err = check(f) + docs(f)
        for e in err:
            print("FAIL", e)
        print("# readme_commands: %d break(s)" % len(err))
        return 1 if err else 0
    if args == ["--self-test"]:
        bad = 0
        base = check(f) + docs(f)
        if base:
            print("FAIL the files as they are break %d rule(s): %s" % (len(base), base))
            bad += 1
        for what, words, g in plants(f, ctests):
            err = check(g) + docs(g)
            hit = [e for e in err if words in e]
            print("%s %s: %s" % ("ok  " if hit else "FAIL", what, hit[0] if hit else "not caught (%s)" % err))
            bad += 0 if hit else 1
        print("# readme_commands self-test: %d failed" % bad)
        return 1 if bad else 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
