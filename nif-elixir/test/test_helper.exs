# The tests compare with references in test/support/ref.ex. KILN_POISON makes every fresh GPU
# buffer start as 0xFF bytes (NaN), so an op that leaves an element unwritten is caught.
System.put_env("KILN_POISON", "1")
ExUnit.start()
