# A thread burning CPU in Ruby (`burn`) while the main thread sleeps in `nap`, 5 ms at a time, for
# ARGV[0] seconds: the main thread is off CPU, without the VM's lock, nearly all the time, and the
# burner holds the lock. Prints `ready` first.

def churn(rounds)
  x = 1
  i = 0
  while i < rounds
    x = (x * 31 + i) % 1_000_003
    i += 1
  end
  x
end

def burn(deadline)
  churn(10_000) while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
end

def nap
  sleep(0.005)
end

deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV.fetch(0, "10"))
burner = Thread.new { burn(deadline) }
$stdout.puts "ready"
$stdout.flush
nap while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
burner.join
