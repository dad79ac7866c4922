# Spends 50/30/20% of its CPU in burn_a, burn_b and burn_c, called from `main`, and measures that
# split itself with the thread's CPU clock. Prints `ready`, runs for ARGV[0] seconds, then prints
# `accounted burn_a=P burn_b=P burn_c=P` (percent of the three's CPU time).

def cpu_now
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

# A pure-Ruby loop: every instruction runs in the VM's loop, none in a C method.
def churn(rounds)
  x = 1
  i = 0
  while i < rounds
    x = (x * 31 + i) % 1_000_003
    i += 1
  end
  x
end

def burn_a
  churn(50_000)
end

def burn_b
  churn(30_000)
end

def burn_c
  churn(20_000)
end

def main(seconds)
  spent = { "burn_a" => 0.0, "burn_b" => 0.0, "burn_c" => 0.0 }
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
  $stdout.puts "ready"
  $stdout.flush
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    t = cpu_now
    burn_a
    spent["burn_a"] += cpu_now - t
    t = cpu_now
    burn_b
    spent["burn_b"] += cpu_now - t
    t = cpu_now
    burn_c
    spent["burn_c"] += cpu_now - t
  end
  all = spent.values.sum
  $stdout.puts "accounted " + spent.map { |k, v| format("%s=%.2f", k, 100.0 * v / all) }.join(" ")
end

main(Float(ARGV.fetch(0, "10")))
