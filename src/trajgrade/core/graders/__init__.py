"""The graders: one module per grader type, what they share in ``base``, and every type in ``catalogue``.

This package imports nothing when it is imported: a module that needs one grader's types (the config model
needs ``base``) does not load the catalogue, and the catalogue's graders (the composite runs its children with
``running``) can import what they need at the top of their modules.
"""
