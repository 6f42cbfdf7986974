"""Algorithm-agnostic plumbing for canter.

Importing this package turns off XLA:CPU's asynchronous dispatch before JAX creates its CPU
client (gymnax creates it on import): it can deadlock (jax-ml/jax#25861), and runs here hung
now and then with the main thread waiting on a buffer at 0% CPU. The host runner waits for
every interval anyway, so inline dispatch costs nothing.
"""

import jax

jax.config.update("jax_cpu_enable_async_dispatch", False)
