#!/usr/bin/env python3
"""readme_commands.py - the README's commands and what runs them, kept in step.

    readme_commands.py [--root DIR] check        every rule below; exit 1 naming each break
    readme_commands.py [--root DIR] show NAME    print the README's command NAME (cpu-setup,
                                                 tests, gpu-setup), as tests/fresh/ runs it
    readme_commands.py [--root DIR] --self-test  plant one break of each kind in copies of
                                                 the files; each must be named

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
Standard library only.
"""
import os
import re
import shlex
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


def plants(f):
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
    ]


def main():
    args = sys.argv[1:]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if args[:1] == ["--root"]:
        root, args = args[1], args[2:]
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
    if args == ["check"]:
        err = check(f)
        for e in err:
            print("FAIL", e)
        print("# readme_commands: %d break(s)" % len(err))
        return 1 if err else 0
    if args == ["--self-test"]:
        bad = 0
        base = check(f)
        if base:
            print("FAIL the files as they are break %d rule(s): %s" % (len(base), base))
            bad += 1
        for what, words, g in plants(f):
            err = check(g)
            hit = [e for e in err if words in e]
            print("%s %s: %s" % ("ok  " if hit else "FAIL", what, hit[0] if hit else "not caught (%s)" % err))
            bad += 0 if hit else 1
        print("# readme_commands self-test: %d failed" % bad)
        return 1 if bad else 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
