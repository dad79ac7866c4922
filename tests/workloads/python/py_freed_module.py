"""Runs module code that is freed as soon as it ran, again and again, as imports do: each pass
compiles a module body and executes it once, so its code object lives about a millisecond, and is
gone by the time a profiler that reads it later gets to it. Its name (`<module>`) and file name
outlive it.

The bodies hold a hundred assignments or more, so each code object (its bytecode is part of it) is
larger than CPython's small-object allocator serves: freed, it goes back to glibc, which overwrites
its type word at once, as it does for most modules' code. Bodies of 48 sizes take 48 addresses,
each announced on its own."""

FILE = "generated_module.py"
BODIES = [
    "\n".join(f"v{j} = {j}" for j in range(100 + 4 * i))
    + "\nn = 0\nwhile n < 20000:\n    n += 1\n"
    for i in range(48)
]


def churn():
    i = 0
    while True:
        exec(compile(BODIES[i % len(BODIES)], FILE, "exec"), {})
        i += 1


print("ready", flush=True)
churn()
