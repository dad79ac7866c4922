# Spends 50/30/20% of its CPU in Object#burn_a (a method at the top level),
# Split::Burner#burn_b (an instance method) and Split::Burner.burn_c (a class method, whose work a
# block does under `Integer#times`, a C method entering the VM again), called from `main`, and
# measures that split itself with the thread's CPU clock. Prints `ready`, runs for ARGV[0] seconds,
# then prints `accounted Object#burn_a=P Split::Burner#burn_b=P Split::Burner.burn_c=P` (percent of
# the three's CPU time), named as Ruby 3.4's backtraces name them.

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

module Split
  class Burner
    def burn_b
      churn(30_000)
    end

    def self.burn_c
      x = 0
      1.times { x = churn(20_000) }
      x
    end
  end
end

def main(seconds)
  spent = { "Object#burn_a" => 0.0, "Split::Burner#burn_b" => 0.0, "Split::Burner.burn_c" => 0.0 }
  burner = Split::Burner.new
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
  $stdout.puts "ready"
  $stdout.flush
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    t = cpu_now
    burn_a
    spent["Object#burn_a"] += cpu_now - t
    t = cpu_now
    burner.burn_b
    spent["Split::Burner#burn_b"] += cpu_now - t
    t = cpu_now
    Split::Burner.burn_c
    spent["Split::Burner.burn_c"] += cpu_now - t
  end
  all = spent.values.sum
  $stdout.puts "accounted " + spent.map { |k, v| format("%s=%.2f", k, 100.0 * v / all) }.join(" ")
end

main(Float(ARGV.fetch(0, "10")))
