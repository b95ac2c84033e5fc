"""The one C extension: the sidecar's OTLP reader and result encoder. The rest of the package is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "trajgrade.sidecar._protowire",
            ["src/trajgrade/sidecar/_protowire.c"],
            extra_compile_args=["-O2", "-Wall", "-Wno-missing-field-initializers"],
        )
    ]
)
