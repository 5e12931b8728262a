"""Tenant classifiers trained from a platform's own labelled examples (issue 40).

A tenant labels texts (its reviewers' decisions); `examples` reads and validates them, `features`
turns a text into what the classifier reads (the multilingual sentence encoder, frozen, and character
n-grams fitted on the tenant's texts), `train` fits one class-balanced logistic head per category with
its threshold chosen by cross-validation and reports precision, recall, F1 and a learning curve on a
held-out fraction, and `artifact` writes and loads the versioned, checksummed result. Pure Python and
numpy (scikit-learn at training time); nothing here imports gRPC.
"""
