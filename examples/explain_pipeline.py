"""What tracearray made of a function: the traced graph, the kernel plan and explain().

    python examples/explain_pipeline.py
"""
import numpy as np

import tracearray


@tracearray.compile
def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def main() -> None:
    x = np.linspace(-4.0, 4.0, 1 << 16, dtype=np.float32)
    lowered = gelu.lower(x)
    print("== graph (every NumPy operation, recorded)")
    print(lowered.as_text("graph"))
    print("== plan (the kernels)")
    print(lowered.as_text("plan"))
    print("== explain() (bytes moved, temporaries avoided)")
    print(gelu.explain(x))
    llvm = lowered.as_text("llvm-opt")
    print(f"== LLVM IR after optimisation: {len(llvm.splitlines())} lines, vector code: "
          f"{'<8 x float>' in llvm or '<16 x float>' in llvm or '<4 x float>' in llvm}")


if __name__ == "__main__":
    main()
