"""The one C extension: the sidecar's OTLP reader. Everything else about the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "trajgrade.sidecar._otlpread",
            ["src/trajgrade/sidecar/_otlpread.c"],
            extra_compile_args=["-O2", "-Wall", "-Wno-missing-field-initializers"],
        )
    ]
)
