"""Runs module code that is freed as soon as it ran, again and again, as imports do: each pass
compiles a module body and executes it once, so its code objects live about a millisecond, and are
gone by the time a profiler that reads them later gets to them, with their names and file name.

Pass N compiles, as file `generated_N.py`, a body that defines `spin_N`, calls it and deletes it:
the module's code, the function's code and both strings (`spin_N`, `generated_N.py`) are freed when
the pass ends, and the next pass's objects may take their addresses. The bodies hold a hundred
assignments or more, so each module's code object (its bytecode is part of it) is larger than
CPython's small-object allocator serves: freed, it goes back to glibc, which overwrites its type word
at once, as it does for most modules' code. Bodies of 48 sizes take 48 addresses."""

ASSIGNMENTS = [
    "\n".join(f"v{j} = {j}" for j in range(100 + 4 * i)) for i in range(48)
]


def churn():
    i = 0
    while True:
        body = (
            ASSIGNMENTS[i % len(ASSIGNMENTS)]
            + f"\ndef spin_{i}():\n    n = 0\n    while n < 20000:\n        n += 1\n"
            + f"spin_{i}()\ndel spin_{i}\n"
        )
        exec(compile(body, f"generated_{i}.py", "exec"), {})
        i += 1


print("ready", flush=True)
churn()
