# A thread burning CPU in Ruby (`burn`) while the main thread sleeps in `nap`, 5 ms at a time, for
# ARGV[0] seconds: the main thread is off CPU, without the VM's lock, nearly all the time, and the
# burner holds the lock. Prints `ready` first.

# Pure Ruby: every instruction runs in the VM, holding its lock.
def burn(deadline)
  x = 1
  x = (x * 31 + 7) % 1_000_003 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  x
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
