<?php
// Sleeps 20 ms in sleep_twenty, then 10 ms in sleep_ten, for $argv[1] seconds: its off-CPU time
// splits 2:1 between the two. Prints `ready` first.

function sleep_twenty(): void
{
    usleep(20000);
}

function sleep_ten(): void
{
    usleep(10000);
}

$deadline = hrtime(true) + (int) ((float) ($argv[1] ?? '10') * 1e9);
echo "ready\n";
fflush(STDOUT);
while (hrtime(true) < $deadline) {
    sleep_twenty();
    sleep_ten();
}
