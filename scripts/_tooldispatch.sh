# Sourced by the serve-*.sh wrappers: run the project's CLI from its virtual environment when there is one.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -x "$here/.venv/bin/tooldispatch" ]; then
    tooldispatch=("$here/.venv/bin/tooldispatch")
elif command -v tooldispatch >/dev/null 2>&1; then
    tooldispatch=(tooldispatch)
else
    tooldispatch=(python3 -m tooldispatch)
fi
