<?php
// Spends 50/30/20% of its CPU in burn_a, Burner::burn_b and burn_c, called from `main`, and
// measures that split itself with the process's CPU time. Prints `ready`, runs for $argv[1]
// seconds, then prints `accounted burn_a=P Burner::burn_b=P burn_c=P` (percent of the three's CPU
// time).

function cpu_now(): float
{
    $u = getrusage();
    return $u['ru_utime.tv_sec'] + $u['ru_utime.tv_usec'] / 1e6
        + $u['ru_stime.tv_sec'] + $u['ru_stime.tv_usec'] / 1e6;
}

// A pure-PHP loop: every opline runs in the executor, none in a C function.
function churn(int $rounds): int
{
    $x = 1;
    for ($i = 0; $i < $rounds; $i++) {
        $x = ($x * 31 + $i) % 1000003;
    }
    return $x;
}

function burn_a(): int
{
    return churn(50000);
}

final class Burner
{
    public static function burn_b(): int
    {
        return churn(30000);
    }
}

// Through a C function: `array_map` enters the executor again for the closure.
function burn_c(): int
{
    return array_map(fn (int $n): int => churn($n), [20000])[0];
}

function main(float $seconds): void
{
    $spent = ['burn_a' => 0.0, 'Burner::burn_b' => 0.0, 'burn_c' => 0.0];
    $deadline = hrtime(true) + (int) ($seconds * 1e9);
    echo "ready\n";
    fflush(STDOUT);
    while (hrtime(true) < $deadline) {
        $t = cpu_now();
        burn_a();
        $spent['burn_a'] += cpu_now() - $t;
        $t = cpu_now();
        Burner::burn_b();
        $spent['Burner::burn_b'] += cpu_now() - $t;
        $t = cpu_now();
        burn_c();
        $spent['burn_c'] += cpu_now() - $t;
    }
    $all = array_sum($spent);
    $parts = [];
    foreach ($spent as $name => $s) {
        $parts[] = sprintf('%s=%.2f', $name, 100.0 * $s / $all);
    }
    echo 'accounted ' . implode(' ', $parts) . "\n";
}

main((float) ($argv[1] ?? '10'));
