import Theorems.NatArith
import Theorems.Logic
import Theorems.Lists
import Theorems.Functional
