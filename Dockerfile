# One image for web, the workers and beat; docker-compose.yml picks the command.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
WORKDIR /app

COPY requirements.txt .
# Point this at an index holding the CPU build of torch 2.13.0 (see README.md); without it
# pip takes the default build, which brings gigabytes of CUDA libraries.
ARG PIP_EXTRA_INDEX_URL=""
RUN PIP_EXTRA_INDEX_URL="$PIP_EXTRA_INDEX_URL" pip install --no-cache-dir -r requirements.txt

COPY . .
# The static assets under their hashed names, in the image: the web containers do not run
# bootstrap (the migrate one does). Not through manage.py, which would start embedded
# services; a throwaway key, so no secret is baked into the image.
RUN DJANGO_SECRET_KEY=collectstatic-only DJANGO_SETTINGS_MODULE=searchsite.settings \
    python -m django collectstatic --noinput --verbosity 0
# The mount points of docker-compose.yml's volumes, owned by the user that writes to them:
# a named volume mounted on a missing directory would be root's.
RUN useradd --create-home searchsite && mkdir -p /app/.run/models /metrics \
    && chown searchsite /app/.run /app/.run/models /metrics
USER searchsite

EXPOSE 8000
CMD ["python", "-m", "uvicorn", "searchsite.asgi:application", "--host", "0.0.0.0", "--port", "8000"]
